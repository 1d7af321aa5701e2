"""What every engine's start-up reader shares: the phase record, the live status line, and
a log reader that splits the text it is fed into whole lines (a trailing partial line waits
for the rest), opens the `process` phase at launch and writes the summary
(engines/startup_summary.py).

Each engine's reader subclasses `StartupLog`, giving its phase record, order and labels and
reading each line in `_line`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from orchestrator.engines import startup_summary

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass
class Phase:
    name: str
    started_at: float
    ended_at: float | None = None
    engine_seconds: float | None = None  # as the engine printed it
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Status:
    """A reader's live line: the phase reached and the time since launch."""

    name: str
    label: str
    total_s: float
    ready: bool
    progress: str | None = None

    @property
    def api_up(self) -> bool:
        return self.name in ("api_server", "ready")


P = TypeVar("P", bound=Phase)


class StartupLog(Generic[P]):
    """Feed it the log as it arrives; `summary()` at the end."""

    def __init__(self, record: type[P], order: tuple[str, ...], labels: Mapping[str, str],
                 origin: float | None) -> None:
        self._record, self._order, self._labels = record, order, labels
        self.origin = origin
        self.phases: dict[str, P] = {}
        self.facts: dict[str, Any] = {}
        self._partial = ""

    @property
    def ready(self) -> bool:
        return "ready" in self.phases

    def feed_text(self, chunk: str, now: float) -> None:
        """A chunk of the log as read from the file; a trailing partial line waits for the rest."""
        lines = _LINE_BREAK.split(self._partial + chunk)
        self._partial = lines.pop()
        self.feed(lines, now)

    def feed(self, lines: Iterable[str], now: float) -> None:
        """Whole log lines that arrived by controller time `now`."""
        if self.origin is None:  # the first feed: the clock starts (unless given) ...
            self.origin = now
        if "process" not in self.phases:  # ... and so does the process
            self.phases["process"] = self._record("process", self.origin)
        for line in lines:
            self._line(line, now)

    def _line(self, line: str, now: float) -> None:
        """One whole line of the engine's log: the engine's own rules."""
        raise NotImplementedError

    def summary(self) -> list[dict[str, Any]]:
        """One JSON-able entry per phase reached, in start-up order (engines/startup_summary.py)."""
        return startup_summary.summary(self.phases, self._order, self._labels, self.origin)
