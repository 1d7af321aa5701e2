"""The router's start-up, read from its log: it is ready once it says so.

    ... INFO vllm_router_rs::server: src/server.rs:1192: Router ready | workers: [...]

Pure: lines in, phases out, in the record shape every engine's reader writes (startup.json).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.engines.startup_log import Phase, StartupLog

ORDER = ("process", "ready")
LABELS = {"process": "starting", "ready": "ready"}
_READY = re.compile(r"Router ready\b")


@dataclass(frozen=True)
class Status:
    name: str
    label: str
    total_s: float
    ready: bool
    progress: str | None = None

    @property
    def api_up(self) -> bool:
        return self.ready


class RouterStartup(StartupLog[Phase]):
    """Feed it the log as it arrives; `current()` for a live line, `summary()` at the end."""

    ORDER = ORDER
    LABELS = LABELS

    def __init__(self, origin: float | None = None) -> None:
        super().__init__(Phase, origin)

    def feed(self, lines: Iterable[str], now: float) -> None:
        self._launched(now)
        for line in lines:
            if _READY.search(line) and not self.ready:
                self.phases["process"].ended_at = now
                self.phases["ready"] = Phase("ready", now, now)

    def current(self, now: float | None = None) -> Status | None:
        if not self.phases or self.origin is None:
            return None
        name = "ready" if self.ready else "process"
        at = now if now is not None else self.phases[name].started_at
        return Status(name, LABELS[name], max(0.0, at - self.origin), self.ready)
