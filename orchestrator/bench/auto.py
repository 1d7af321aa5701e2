"""`concurrency: auto`: find the knee, where output throughput stops paying for concurrency.

Definition: the knee is the smallest concurrency C at which doubling C gains less than
`threshold` output throughput, T(2C) < (1 + threshold) * T(C), or the largest C that
still meets the latency objectives, whichever is smaller.

Search (pure: the next level is a function of what was measured so far):
1. double from `start` until a doubling gains less than the threshold (or the objectives
   break, or `max_concurrency` is reached);
2. narrow by bisection between the last level that still gained and the first that did
   not, until the bracket is within `resolution` of its upper end. T(2m) for a midpoint m
   lies between two measured levels and is estimated from them, 1/T linear in 1/C (the
   shape of a continuous-batching curve T(C) = C / (a + b C)): once along the chord
   between the two, once along the segment just below them carried on. The two agree on
   such a curve; they part where the segment holds a bend, such as the flat top beyond
   the server's running-sequence cap, where the chord alone underestimates T(2m) and puts
   the knee low. When the two estimates (kept between the two measured throughputs)
   disagree on whether doubling m gains the threshold, 2m is measured.
"""

from __future__ import annotations

import math
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


def _through(levels: Mapping[int, Observation], a: int, b: int, c: int) -> float:
    """T(c) on the curve through levels a and b: 1/T linear in 1/C, exact on a continuous-
    batching curve (a straight line would underestimate it)."""
    t_a, t_b = levels[a].throughput, levels[b].throughput
    if t_a <= 0 or t_b <= 0:
        return t_a + (t_b - t_a) * (c - a) / (b - a)
    weight = (1 / c - 1 / a) / (1 / b - 1 / a)
    inverse = 1 / t_a + (1 / t_b - 1 / t_a) * weight
    return 1 / inverse if inverse > 0 else math.inf  # carried past where the model ends


def _estimates(levels: Mapping[int, Observation], c: int) -> tuple[float, float] | None:
    """Low and high estimates of T(c) from the usable levels around it (equal when c was
    measured), or None when c is not between two of them."""
    usable = {k: o for k, o in levels.items() if o.usable}
    if c in usable:
        return usable[c].throughput, usable[c].throughput
    below = sorted(k for k in usable if k < c)
    above = [k for k in usable if k > c]
    if not below or not above:
        return None
    lo, hi = below[-1], min(above)
    guesses = [_through(usable, lo, hi, c)]
    if len(below) > 1:  # the segment below, carried on: it sees a bend the chord hides
        guesses.append(_through(usable, below[-2], lo, c))
    floor, ceiling = sorted((usable[lo].throughput, usable[hi].throughput))
    return (min(max(min(guesses), floor), ceiling), max(min(max(guesses), ceiling), floor))


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
        target = (1 + auto.threshold) * levels[mid].throughput
        doubled = _estimates(levels, 2 * mid)
        if doubled is None:
            if 2 * mid > auto.max_concurrency or 2 * mid in levels:
                hi = mid
                continue
            return Decision(2 * mid)
        low, high = doubled
        if low < target <= high and 2 * mid not in levels:
            return Decision(2 * mid)  # the estimates disagree: measure
        if (low + high) / 2 < target:
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
