"""`concurrency: auto`: find the knee, where output throughput stops paying for concurrency.

Definition: the knee is the smallest concurrency C at which doubling C gains less than
`threshold` output throughput, T(2C) < (1 + threshold) * T(C), or the largest C that
still meets the latency objectives, whichever is smaller.

Search (pure: the next level is a function of what was measured so far):
1. double from `start` until a doubling gains less than the threshold (or the objectives
   break, or `max_concurrency` is reached);
2. narrow by bisection between the last level that still gained and the first that did
   not, until the bracket is within `resolution` of its upper end. T(2m) for a midpoint m
   lies between two levels already measured in step 1 and is interpolated between them
   (1/T linear in 1/C, the shape of a continuous-batching curve).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.plan.models import AutoSweep


@dataclass(frozen=True)
class Observation:
    throughput: float
    slo_ok: bool = True
    usable: bool = True  # False when most requests failed or the level was cut short


@dataclass(frozen=True)
class Decision:
    next_level: int | None  # None: the search is over
    knee: int | None = None
    reason: str = ""


def _interpolated(levels: Mapping[int, Observation], c: int) -> float | None:
    if c in levels:
        return levels[c].throughput
    below = [k for k in levels if k < c]
    above = [k for k in levels if k > c]
    if not below or not above:
        return None
    lo, hi = max(below), min(above)
    t_lo, t_hi = levels[lo].throughput, levels[hi].throughput
    if t_lo <= 0 or t_hi <= 0:
        return t_lo + (t_hi - t_lo) * (c - lo) / (hi - lo)
    # Continuous batching gives T(c) = c / (a + b c), i.e. 1/T linear in 1/c: interpolate
    # there, which is exact on such a curve (a straight line would underestimate it).
    weight = (1 / c - 1 / lo) / (1 / hi - 1 / lo)
    return 1 / (1 / t_lo + (1 / t_hi - 1 / t_lo) * weight)


def _done(lo: int, hi: int, resolution: float) -> bool:
    return hi - lo <= max(1, int(hi * resolution))


def decide(levels: Mapping[int, Observation], auto: AutoSweep) -> Decision:
    """The next concurrency to measure, or the knee when the search is over."""
    threshold, cap = auto.threshold, auto.max_concurrency
    c = min(auto.start, cap)
    # 1. doubling
    while True:
        if c not in levels:
            return Decision(c)
        here = levels[c]
        if not here.usable:
            previous = c // 2 if c // 2 >= auto.start else None
            return Decision(None, previous, "failed")
        if not here.slo_ok:
            lo = c // 2 if c // 2 >= auto.start else None
            if lo is None:
                return Decision(None, None, "slo")
            return _narrow_slo(levels, lo, c, auto)
        if c >= cap:
            return Decision(None, c, "max_concurrency")
        doubled = min(2 * c, cap)
        if doubled not in levels:
            return Decision(doubled)
        there = levels[doubled]
        if not there.usable or not there.slo_ok:
            c = doubled
            continue
        if there.throughput < (1 + threshold) * here.throughput:
            lo = c // 2 if c // 2 >= auto.start and c // 2 in levels else None
            if lo is None:
                return Decision(None, c, "plateau")
            return _narrow_plateau(levels, lo, c, auto)
        c = doubled


def _narrow_plateau(levels: Mapping[int, Observation], lo: int, hi: int, auto: AutoSweep) -> Decision:
    # invariant: doubling lo still gained, doubling hi did not
    while not _done(lo, hi, auto.resolution):
        mid = (lo + hi) // 2
        if mid not in levels:
            return Decision(mid)
        if not levels[mid].usable or not levels[mid].slo_ok:
            return _narrow_slo(levels, lo, mid, auto)
        doubled = _interpolated(levels, 2 * mid)
        if doubled is None:
            if 2 * mid > auto.max_concurrency:
                hi = mid
                continue
            return Decision(2 * mid)
        if doubled < (1 + auto.threshold) * levels[mid].throughput:
            hi = mid
        else:
            lo = mid
    return Decision(None, hi, "plateau")


def _narrow_slo(levels: Mapping[int, Observation], lo: int, hi: int, auto: AutoSweep) -> Decision:
    # invariant: lo meets the objectives, hi does not
    while not _done(lo, hi, auto.resolution):
        mid = (lo + hi) // 2
        if mid not in levels:
            return Decision(mid)
        if levels[mid].usable and levels[mid].slo_ok:
            lo = mid
        else:
            hi = mid
    return Decision(None, lo, "slo")


def knee_of_curve(throughput: Mapping[int, float], threshold: float) -> int | None:
    """The knee by definition, on a fully known curve (for checks and tests): the smallest
    C with T(2C) < (1 + threshold) T(C)."""
    for c in sorted(throughput):
        if 2 * c in throughput and throughput[2 * c] < (1 + threshold) * throughput[c]:
            return c
    return None


def knee_of_sweep(curve: Mapping[int, float], threshold: float) -> int | None:
    """The knee of a measured sweep (a report's view): the smallest C whose throughput no
    level at 2C or beyond beats by the threshold. Unlike `knee_of_curve`, a dip (C=2 below
    C=1 in the motivating run) does not count as a knee when higher loads recover."""
    for c in sorted(curve):
        later = [t for load, t in curve.items() if load >= 2 * c]
        if later and max(later) < (1 + threshold) * curve[c]:
            return c
    return None
