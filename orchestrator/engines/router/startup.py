"""The router's start-up, read from its log: it is ready once it says so.

    ... INFO vllm_router_rs::server: src/server.rs:1192: Router ready | workers: [...]

Pure: lines in, phases out, in the record shape every engine's reader writes (startup.json).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines import startup_summary

ORDER = ("process", "ready")
LABELS = {"process": "starting", "ready": "ready"}
_READY = re.compile(r"Router ready\b")


@dataclass
class _Phase:
    name: str
    started_at: float
    ended_at: float | None = None
    engine_seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


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


class RouterStartup:
    """Feed it the log as it arrives; `current()` for a live line, `summary()` at the end."""

    def __init__(self, origin: float | None = None) -> None:
        self.origin = origin
        self.phases: dict[str, _Phase] = {}
        self.facts: dict[str, Any] = {}
        self._partial = ""

    @property
    def ready(self) -> bool:
        return "ready" in self.phases

    def feed_text(self, chunk: str, now: float) -> None:
        lines = re.split(r"\r\n|\r|\n", self._partial + chunk)
        self._partial = lines.pop()
        self.feed(lines, now)

    def feed(self, lines: Iterable[str], now: float) -> None:
        if self.origin is None:
            self.origin = now
        self.phases.setdefault("process", _Phase("process", self.origin))
        for line in lines:
            if _READY.search(line) and not self.ready:
                self.phases["process"].ended_at = now
                self.phases["ready"] = _Phase("ready", now, now)

    def current(self, now: float | None = None) -> Status | None:
        if not self.phases or self.origin is None:
            return None
        name = "ready" if self.ready else "process"
        at = now if now is not None else self.phases[name].started_at
        return Status(name, LABELS[name], max(0.0, at - self.origin), self.ready)

    def summary(self) -> list[dict[str, Any]]:
        return startup_summary.summary(self.phases, ORDER, LABELS, self.origin)
