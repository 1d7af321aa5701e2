"""When a tune stops (pure): at the trial budget, at the time budget, or when three trials
in a row gain under 3% over the best before them. Every trial that ran an apply counts toward the trial budget (one that failed
too: its time was spent); a candidate skipped by its prediction runs nothing and does not.
A failed trial is a trial without gain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

STALL_TRIALS = 3
STALL_GAIN = 0.03


@dataclass(frozen=True)
class Budget:
    trials: int | None = None  # trials that run an apply, the baseline included
    seconds: float | None = None


def stalled(scores: Sequence[float | None]) -> bool:
    """Whether the last three trials that ran (in the order they ended; None for one that
    failed or met no SLO) each gained under 3% over the best before it."""
    if len(scores) <= STALL_TRIALS:
        return False
    best: float | None = None
    misses = 0
    for score in scores:
        gained = score is not None and (best is None or score > best * (1 + STALL_GAIN))
        misses = 0 if gained else misses + 1
        if score is not None and (best is None or score > best):
            best = score
    return misses >= STALL_TRIALS and best is not None


def stop_reason(budget: Budget, ran: int, elapsed: float, scores: Sequence[float | None]) -> str | None:
    """Why the tune stops now, or None to go on."""
    if budget.trials is not None and ran >= budget.trials:
        return f"the trial budget: {ran} of {budget.trials} trials ran"
    if budget.seconds is not None and elapsed >= budget.seconds:
        return f"the time budget: {elapsed:.0f}s of {budget.seconds:.0f}s spent"
    if stalled(scores):
        return (f"{STALL_TRIALS} trials in a row gained under {STALL_GAIN:.0%} over the best "
                "before them")
    return None
