"""The router's start-up, read from its log: it is ready once it says so.

    ... INFO vllm_router_rs::server: src/server.rs:1192: Router ready | workers: [...]

Pure: lines in, phases out, in the record shape every engine's reader writes (startup.json).
"""

from __future__ import annotations

import re

from orchestrator.engines.startup_log import Phase, StartupLog, Status

ORDER = ("process", "ready")
LABELS = {"process": "starting", "ready": "ready"}
_READY = re.compile(r"Router ready\b")


class RouterStartup(StartupLog[Phase]):
    """The router's start-up, fed its log: `current()` for a live line, `summary()` at the end."""

    def __init__(self, origin: float | None = None) -> None:
        super().__init__(Phase, ORDER, LABELS, origin)

    def _line(self, line: str, now: float) -> None:
        if _READY.search(line) and not self.ready:
            self.phases["process"].ended_at = now
            self.phases["ready"] = Phase("ready", now, now)

    def current(self, now: float | None = None) -> Status | None:
        if not self.phases or self.origin is None:
            return None
        name = "ready" if self.ready else "process"
        at = now if now is not None else self.phases[name].started_at
        return Status(name, LABELS[name], max(0.0, at - self.origin), self.ready)
