"""A measured level's progress as events: counted twice a second on the event loop itself
(the records are the loop's; no thread reads them while requests run) and handed to the
sweep's observer, which draws them (live_view.py) or drops them (piped output)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from orchestrator.bench.load import RequestRun
from orchestrator.bench.request_record import RequestRecord
from orchestrator.events import Emit, LevelProgress

REFRESH_S = 0.5


@dataclass(frozen=True)
class Tally:
    """Requests done and failed so far, and the tokens streamed."""

    done: int = 0
    failed: int = 0
    tokens: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.done + other.done, self.failed + other.failed,
                     self.tokens + other.tokens)


def tally(records: Sequence[RequestRecord]) -> Tally:
    return Tally(
        done=sum(1 for r in records if r.end_ns),
        failed=sum(1 for r in records if r.end_ns and r.error_kind is not None),
        # per-chunk usage counts the tokens of chunks with no text or several tokens
        tokens=sum(max(len(r.token_ns), r.metered_tokens) for r in records))


def progress_of(host: str, label: str, run: RequestRun, total: int | None,
                now_ns: int, counted: Tally | None = None) -> LevelProgress:
    """The run's progress: its records' tally, or `counted` (client processes' records
    are their own until the end: they send their tallies)."""
    seen = counted if counted is not None else tally(run.records)
    elapsed = max(1e-9, (now_ns - run.origin_ns) / 1e9) if run.origin_ns else 0.0
    rate = seen.tokens / elapsed if elapsed else 0.0
    return LevelProgress(host, label=label, done=seen.done, total=total, failed=seen.failed,
                         elapsed_s=elapsed, streamed_tok_s=rate)


@contextlib.asynccontextmanager
async def progress_events(emit: Emit | None, host: str, label: str, run: RequestRun,
                          total: int | None,
                          counted: Callable[[], Tally] | None = None) -> AsyncIterator[None]:
    """Emit the level's progress while the body runs (nothing without an observer);
    `counted()`: the tally, when `run` does not hold the records yet."""
    if emit is None:
        yield
        return

    async def tick() -> None:
        while True:
            emit(progress_of(host, label, run, total, time.perf_counter_ns(),
                             counted() if counted is not None else None))
            await asyncio.sleep(REFRESH_S)

    task = asyncio.ensure_future(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
