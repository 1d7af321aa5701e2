"""The live view of a run on a terminal: one line per host still at work, with its step or
phase, the latest thing it said (a start-up phase, a shard count) and how long it has been
at it, redrawn four times a second below the lines of what has finished.

Pure state plus a render function: `HostBoard.update(event)` and `HostBoard.table(now)` are
plain calls tests make; `LiveView` only ties them to rich's Live.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from orchestrator.events import (
    Event,
    HostEnd,
    HostStart,
    PhaseEvent,
    Probed,
    Retry,
    StepEnd,
    StepStart,
)


@dataclass
class HostRow:
    host: str
    started: float  # the host's start (monotonic seconds)
    doing: str = "connecting"
    since: float = 0.0  # when `doing` began
    said: str = ""


class HostBoard:
    """What each host is doing now, from the run's events (any thread)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.rows: dict[str, HostRow] = {}
        self._lock = threading.Lock()

    def update(self, event: Event) -> None:
        now = self.clock()
        with self._lock:
            if isinstance(event, HostStart):
                self.rows[event.host] = HostRow(event.host, started=now, since=now)
                return
            row = self.rows.get(event.host)
            if row is None:
                return
            if isinstance(event, HostEnd):
                del self.rows[event.host]
            elif isinstance(event, Probed):
                self._doing(row, "probe", now)
            elif isinstance(event, StepStart):
                self._doing(row, event.step, now)
            elif isinstance(event, Retry):
                row.said = f"retry {event.attempt}: {event.error}"
            elif isinstance(event, PhaseEvent) and event.status == "running":
                self._doing(row, event.phase, now)
                row.said = event.message
            elif isinstance(event, StepEnd | PhaseEvent):
                row.said = ""

    @staticmethod
    def _doing(row: HostRow, what: str, now: float) -> None:
        if row.doing != what:
            row.doing, row.since, row.said = what, now, ""

    def table(self) -> Table:
        now = self.clock()
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="bold cyan", min_width=14)
        grid.add_column(no_wrap=True, min_width=10)
        grid.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
        grid.add_column(justify="right", no_wrap=True, style="dim")
        with self._lock:
            for row in self.rows.values():
                grid.add_row(row.host, Text(row.doing, style="yellow"), row.said,
                             f"{now - row.since:5.1f}s  (host {now - row.started:.0f}s)")
        return grid


class LiveView:
    """The board on a terminal, below the finished lines (rich's Live keeps it last)."""

    def __init__(self, console: Console) -> None:
        self.board = HostBoard()
        self.live = Live(console=console, get_renderable=self.board.table, auto_refresh=True,
                         refresh_per_second=4, transient=True)

    def __enter__(self) -> LiveView:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()
