"""The figures a comparison is made of, taken from level results (pure).

A simulated level carries a `normalized` block: its figures in the model's own time
(durations / time scale, throughputs x time scale). Comparisons use model time, so a run of
the simulator at time scale 0.05 reads like the hardware it models.

- single stream: output throughput at concurrency 1;
- peak: the highest output throughput of any complete level;
- knee: the sweep's own (an `auto` sweep records it), else the smallest concurrency C at
  which doubling gains less than the threshold for good: no level at 2C or beyond reaches
  (1 + threshold) T(C). That is the `auto` definition, T(2C) < (1 + threshold) T(C), made
  robust to a dip: C=2 below C=1 (the motivating run) is not a knee when throughput rises
  again later;
- latency at equal load: a run's latency at a given output throughput, interpolated
  linearly between its levels on the rising part of its curve (up to its peak).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bench.anomalies import capped, effective_concurrency
from orchestrator.bench.auto import knee_of_sweep
from orchestrator.metrics import THROUGHPUTS
from orchestrator.report.percentiles import level_percentiles
from orchestrator.runs.run_records import LevelResult

DEFAULT_KNEE_THRESHOLD = 0.05

LoadKey = tuple[str, float]  # ("c", concurrency) for closed and batch levels, ("r", rate)


@dataclass(frozen=True)
class Point:
    """One level's headline figures, in model time when the run was simulated."""

    level: str
    mode: str
    load: float
    output_throughput: float  # tok/s, reasoning included
    mean_e2el_ms: float | None
    p50_e2el_ms: float | None
    p99_e2el_ms: float | None
    mean_ttft_ms: float | None
    mean_itl_ms: float | None
    completed: int
    failed: int
    partial: bool
    flags: tuple[str, ...]
    request_goodput: float | None = None  # req/s: only when SLOs were given
    # every `pNN_<latency>_ms` the level holds (see percentiles.py)
    percentiles: dict[str, float] = field(default_factory=dict)
    # every throughput of orchestrator/metrics.py the level holds (`orch compare --json`)
    throughputs: dict[str, float] = field(default_factory=dict)
    finish_reasons: dict[str, int] = field(default_factory=dict)  # successful requests
    errors: dict[str, int] = field(default_factory=dict)  # failed requests by kind
    error_message: str | None = None  # what the server said most often (status, reason, body)
    # C asked against what ran (asked, client_in_flight, max_running, max_waiting, scrapes),
    # and when the server ran less than asked, that in words: "8 asked, at most 4 running, 4 waiting"
    effective_concurrency: dict[str, float | int | None] | None = None
    capped: str | None = None

    @property
    def key(self) -> LoadKey:
        return ("r" if self.mode == "rate" else "c", self.load)

    def value(self, metric: str) -> float | None:
        """A figure by name: a field (`mean_ttft_ms`) or a percentile key (`p90_ttft_ms`)."""
        value = self.percentiles.get(metric) if metric in self.percentiles else getattr(self, metric, None)
        return float(value) if isinstance(value, int | float) else None


def _counts(value: Any) -> dict[str, int]:
    """A `{kind: count}` block of a level result (`finish_reasons`, `errors`)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def point_of(result: LevelResult, *, model_time: bool = True) -> Point:
    """A level result as a Point; model time when it has a normalized block."""

    def figure(name: str) -> float | None:
        return result.figure(name, model_time=model_time)

    load = result.request_rate if result.mode == "rate" else result.max_concurrency
    return Point(
        level=result.level,
        mode=result.mode,
        load=float(load) if isinstance(load, int | float) else 0.0,
        output_throughput=figure("output_throughput") or 0.0,
        mean_e2el_ms=figure("mean_e2el_ms"),
        p50_e2el_ms=figure("median_e2el_ms") if figure("median_e2el_ms") is not None else figure("p50_e2el_ms"),
        p99_e2el_ms=figure("p99_e2el_ms"),
        mean_ttft_ms=figure("mean_ttft_ms"),
        mean_itl_ms=figure("mean_itl_ms"),
        completed=result.completed,
        failed=result.failed,
        partial=result.partial,
        flags=tuple(result.flags),
        request_goodput=figure("request_goodput"),
        percentiles=level_percentiles(result, model_time=model_time),
        throughputs={m.name: v for m in THROUGHPUTS if (v := figure(m.name)) is not None},
        finish_reasons=_counts(result.extra("finish_reasons")),
        errors=_counts(result.extra("errors")),
        error_message=_top_message(result.error_messages),
        effective_concurrency=result.effective_concurrency or effective_concurrency(result),
        capped=capped(result) if "capped" in result.flags else None,
    )


def _top_message(value: Any) -> str | None:
    """The most frequent failure message of a level result (`error_messages`)."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        message = value[0].get("message")
        return str(message) if message else None
    return None


def concurrency_points(points: Sequence[Point]) -> list[Point]:
    """Closed and batch levels that produced tokens, by concurrency."""
    return sorted((p for p in points if p.key[0] == "c" and p.completed), key=lambda p: p.load)


def single_stream(points: Sequence[Point]) -> Point | None:
    return next((p for p in concurrency_points(points) if p.load == 1), None)


def peak(points: Sequence[Point]) -> Point | None:
    """The level with the highest output throughput (complete levels before partial ones)."""
    usable = [p for p in points if p.completed]
    whole = [p for p in usable if not p.partial] or usable
    return max(whole, key=lambda p: p.output_throughput, default=None)


def knee(
    points: Sequence[Point], *, recorded: int | None = None, threshold: float = DEFAULT_KNEE_THRESHOLD
) -> tuple[int | None, str]:
    """(knee concurrency, how it was found) — see the module docstring."""
    if recorded is not None:
        return recorded, "found by the auto sweep"
    curve = {int(p.load): p.output_throughput for p in concurrency_points(points) if not p.partial}
    if len(curve) < 2:
        return None, "too few levels"
    found = knee_of_sweep(curve, threshold)
    if found is not None:
        return found, f"doubling gains < {threshold:.0%}"
    return None, f"still rising at C={max(curve)}"


def rising_part(points: Sequence[Point]) -> list[Point]:
    """Concurrency levels up to and including the peak, in load order."""
    ordered = [p for p in concurrency_points(points) if not p.partial]
    if not ordered:
        return []
    top = max(range(len(ordered)), key=lambda i: ordered[i].output_throughput)
    return ordered[: top + 1]


def at_throughput(points: Sequence[Point], target: float, metric: str) -> float | None:
    """`metric` of a run at output throughput `target`, interpolated between the two levels
    around it on the rising part of the curve; None outside the range measured."""
    curve = [(p.output_throughput, p.value(metric)) for p in rising_part(points)]
    for (t_lo, v_lo), (t_hi, v_hi) in itertools.pairwise(curve):
        if v_lo is None or v_hi is None:
            continue
        lo, hi = min(t_lo, t_hi), max(t_lo, t_hi)
        if lo <= target <= hi:
            if hi == lo:
                return v_lo
            weight = (target - t_lo) / (t_hi - t_lo)
            return v_lo + (v_hi - v_lo) * weight
    exact = [v for t, v in curve if t == target and v is not None]
    return exact[0] if exact else None


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base
