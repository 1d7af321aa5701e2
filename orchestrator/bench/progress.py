"""Live progress of the running level: one line, refreshed twice a second from the event
loop itself (no refresh thread competing with the arrival stamps)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

from orchestrator.bench.load import Phase

REFRESH_S = 0.5


def progress_line(label: str, phase: Phase, total: int | None, now_ns: int) -> Text:
    records = phase.records
    done = sum(1 for r in records if r.end_ns)
    failed = sum(1 for r in records if r.end_ns and r.error_kind is not None)
    # per-chunk usage counts the tokens of chunks with no text or several tokens
    tokens = sum(max(len(r.token_ns), r.metered_tokens) for r in records)
    elapsed = max(1e-9, (now_ns - phase.origin_ns) / 1e9) if phase.origin_ns else 0.0
    rate = tokens / elapsed if elapsed else 0.0
    of = f"/{total}" if total is not None else ""
    text = Text(f"  {label:>10}  ", style="bold")
    text.append(f"{done}{of} requests  {elapsed:6.1f} s  {rate:10,.0f} tok/s (streamed)")
    if failed:
        text.append(f"  {failed} failed", style="red")
    return text


@contextlib.asynccontextmanager
async def live_progress(
    console: Console | None, label: str, phase: Phase, total: int | None
) -> AsyncIterator[None]:
    """Show the level's progress on `console` while the body runs (nothing if None or not
    a terminal)."""
    if console is None or not console.is_terminal:
        yield
        return
    live = Live(console=console, auto_refresh=False, transient=True)

    async def tick() -> None:
        while True:
            live.update(progress_line(label, phase, total, time.perf_counter_ns()), refresh=True)
            await asyncio.sleep(REFRESH_S)

    with live:
        task = asyncio.ensure_future(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
