"""How late orch's own client was during a level, and whether its latencies can be trusted
(pure).

The load generator's event loop wakes for a timer every 20 ms (load.py `_loop_lag`); how
late each wake-up came is its lateness. A client whose process is starved of CPU (`nice`
beside busy programs on one core) or paused (SIGSTOP, a debugger, a VM steal) reads token
arrivals late and sends the next request late: its TTFT/ITL/TPOT figures then measure the
client, and the server was not given the load asked.

- `lateness(lags_s, duration_s)`: the level's `client_late` block: the share of its wall
  time lost to wake-ups LATE_MS (50 ms) late or more, how many of them, the longest;
- `very_late(block, median_ms)`: that share at LATE_SHARE (20%) or more, or (a level file
  without the block) the median wake-up LATE_MS late or more: the client decides the level
  (limits/rules.py: client-bound before any server rule) and its latencies are unreliable;
- `itl_batched(level)`: the median ITL is 0 while requests brought more than one token:
  token-bearing chunks were read together (a late client, or a server that sends in
  bursts), so the per-token gaps say nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.runs.run_records import LevelResult

LATE_MS = 50.0  # five times the limiter's 10 ms median threshold: well above a noisy host's jitter
LATE_SHARE = 0.20  # a fifth of the level's wall time lost to such wake-ups
ZERO_ITL_MS = 0.01  # a median gap this small is chunks read at once, not a token rate


def lateness(lags_s: Sequence[float], duration_s: float) -> dict[str, float | int]:
    """The `client_late` block of a level: `share` (0-1 of its wall time lost to wake-ups
    LATE_MS late or more), `pauses` (how many), `longest_ms`, and the threshold used."""
    late = [lag for lag in lags_s if lag * 1000 >= LATE_MS]
    share = min(1.0, sum(late) / duration_s) if duration_s > 0 else 0.0
    return {"late_ms": LATE_MS, "share": round(share, 4), "pauses": len(late),
            "longest_ms": round(max(lags_s, default=0.0) * 1000, 1)}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def late_share(block: Any) -> float | None:
    """The `client_late` block's share (None: no block, an older level file)."""
    return _number(block.get("share")) if isinstance(block, Mapping) else None


def very_late(share: float | None, median_ms: float | None) -> bool:
    """The client lost LATE_SHARE of the level's time to late wake-ups, or (no share
    recorded) its median wake-up was LATE_MS late."""
    if share is not None:
        return share >= LATE_SHARE
    return median_ms is not None and median_ms >= LATE_MS


def client_was_late(level: LevelResult) -> bool:
    """`very_late` of a level, from its `client_late` and `client_loop_lag_ms` blocks."""
    lags = level.extra("client_loop_lag_ms")
    median = _number(lags.get("median")) if isinstance(lags, Mapping) else None
    return very_late(late_share(level.extra("client_late")), median)


def itl_batched(level: LevelResult) -> bool:
    """The median ITL reads 0 while the level's requests brought more than one token each."""
    median = level.figure("median_itl_ms", model_time=False)
    tokens = level.total_output_tokens or 0
    return (median is not None and median <= ZERO_ITL_MS and level.completed > 0
            and tokens > level.completed)
