"""What every engine's start-up reader shares: the phase record, and a log reader that splits
the text it is fed into whole lines (a trailing partial line waits for the rest), opens the
`process` phase at launch and writes the summary (engines/startup_summary.py).

Each engine's reader subclasses `StartupLog` with its own phase order, labels and `feed`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from orchestrator.engines import startup_summary

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass
class Phase:
    name: str
    started_at: float
    ended_at: float | None = None
    engine_seconds: float | None = None  # as the engine printed it
    details: dict[str, Any] = field(default_factory=dict)


P = TypeVar("P", bound=Phase)


class StartupLog(Generic[P]):
    """Feed it the log as it arrives; `summary()` at the end."""

    ORDER: ClassVar[tuple[str, ...]]
    LABELS: ClassVar[Mapping[str, str]]

    def __init__(self, record: type[P], origin: float | None = None) -> None:
        self._record = record
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
        raise NotImplementedError

    def _launched(self, now: float) -> None:
        """The first feed: the clock starts (unless given) and so does the `process` phase."""
        if self.origin is None:
            self.origin = now
        if "process" not in self.phases:
            self.phases["process"] = self._record("process", self.origin)

    def summary(self) -> list[dict[str, Any]]:
        """One JSON-able entry per phase reached, in start-up order (engines/startup_summary.py)."""
        return startup_summary.summary(self.phases, self.ORDER, self.LABELS, self.origin)
