"""The live view of a run on a terminal: one line per host still at work, with its step or
stage, the latest thing it said (a start-up phase, a shard count) and how long it has been
at it, and below them the benchmark level being measured (requests done, tokens streamed),
redrawn four times a second below the lines of what has finished.

Pure state plus a render function: `HostBoard.update(event)` and `HostBoard.table(now)` are
plain calls tests make; `LiveView` only ties them to rich's Live.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from orchestrator.events import (
    Event,
    HostEnd,
    HostStart,
    LevelEnd,
    LevelProgress,
    LevelStart,
    Probed,
    Retry,
    StageEvent,
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
        self.levels: dict[str, LevelProgress] = {}  # by host: the level being measured
        self._lock = threading.Lock()

    def shows(self, host: str) -> bool:
        """Whether `host` has a line of its own (a replica or a router may not)."""
        with self._lock:
            return host in self.rows

    def update(self, event: Event) -> None:
        now = self.clock()
        with self._lock:
            if isinstance(event, LevelProgress):
                self.levels[event.host] = event
                return
            if isinstance(event, LevelStart | LevelEnd | HostEnd):
                self.levels.pop(event.host, None)
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
            elif isinstance(event, StageEvent) and event.status == "running":
                self._doing(row, event.stage, now)
                row.said = event.message
            elif isinstance(event, StepEnd | StageEvent):
                row.said = ""

    @staticmethod
    def _doing(row: HostRow, what: str, now: float) -> None:
        if row.doing != what:
            row.doing, row.since, row.said = what, now, ""

    def view(self) -> RenderableType:
        """The hosts' lines, then a line per level being measured (`orch bench` has no
        host lines: only its level's)."""
        with self._lock:
            levels = [progress_line(progress) for progress in self.levels.values()]
        return Group(self.table(), *levels) if self.rows else Group(*levels)

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


def progress_line(progress: LevelProgress) -> Text:
    of = f"/{progress.total}" if progress.total is not None else ""
    text = Text(f"  {progress.label:>10}  ", style="bold")
    text.append(f"{progress.done}{of} requests  {progress.elapsed_s:6.1f} s  "
                f"{progress.streamed_tok_s:10,.0f} tok/s (streamed)")
    if progress.failed:
        text.append(f"  {progress.failed} failed", style="red")
    return text


class LiveView:
    """The board on a terminal, below the finished lines (rich's Live keeps it last).
    `auto_refresh=False`: no drawing thread; the board is redrawn as each event arrives, in
    the thread that sent it (`orch bench`, whose only events come from its own event loop,
    twice a second: nothing competes with the arrival stamps)."""

    def __init__(self, console: Console, *, auto_refresh: bool = True) -> None:
        self.board = HostBoard()
        self.auto_refresh = auto_refresh
        self.live = Live(console=console, get_renderable=self.board.view,
                         auto_refresh=auto_refresh, refresh_per_second=4, transient=True)

    def update(self, event: Event) -> None:
        self.board.update(event)
        if not self.auto_refresh:
            self.live.refresh()

    def __enter__(self) -> LiveView:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()
