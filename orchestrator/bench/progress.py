"""A measured level's progress as events: counted twice a second on the event loop itself
(the records are the loop's; no thread reads them while requests run) and handed to the
sweep's observer, which draws them (live_view.py) or drops them (piped output)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from orchestrator.bench.load import RequestRun
from orchestrator.events import Emit, LevelProgress

REFRESH_S = 0.5


def progress_of(host: str, label: str, run: RequestRun, total: int | None,
                now_ns: int) -> LevelProgress:
    records = run.records
    done = sum(1 for r in records if r.end_ns)
    failed = sum(1 for r in records if r.end_ns and r.error_kind is not None)
    # per-chunk usage counts the tokens of chunks with no text or several tokens
    tokens = sum(max(len(r.token_ns), r.metered_tokens) for r in records)
    elapsed = max(1e-9, (now_ns - run.origin_ns) / 1e9) if run.origin_ns else 0.0
    rate = tokens / elapsed if elapsed else 0.0
    return LevelProgress(host, label=label, done=done, total=total, failed=failed,
                         elapsed_s=elapsed, streamed_tok_s=rate)


@contextlib.asynccontextmanager
async def progress_events(emit: Emit | None, host: str, label: str, run: RequestRun,
                          total: int | None) -> AsyncIterator[None]:
    """Emit the level's progress while the body runs (nothing without an observer)."""
    if emit is None:
        yield
        return

    async def tick() -> None:
        while True:
            emit(progress_of(host, label, run, total, time.perf_counter_ns()))
            await asyncio.sleep(REFRESH_S)

    task = asyncio.ensure_future(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
