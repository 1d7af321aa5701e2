"""What happened through the level that matters (pure): each run's `/metrics` samples over
the level distributions.py chooses (its knee when the knee is a level it measured, else its
highest complete level): KV-cache usage, running and waiting requests against time, and
the GPUs' power over the same level where the nvidia-smi sampler ran.

A level's mean and peak (server_load.py) say how full the server got; the time series says
how: a queue that builds from the start, a KV cache that fills then preempts, a running
batch that never reaches the load asked for (the level's `effective_concurrency`).

Times start at the level's start (the samplers share its origin); a simulated run shown in
model time has them divided by its time scale, as every duration of the comparison is.
When a level ran several repeats the samplers keep the last one's series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.distributions import chosen_level
from orchestrator.report.series import Series
from orchestrator.runs.run_records import LevelResult

SERVER_GAUGES = ("kv_cache_usage", "running", "waiting")


@dataclass(frozen=True)
class KneeTimeline:
    label: str  # the run
    run: int  # index of the series: its colour
    level: str
    asked: float  # the concurrency of the level
    basis: str  # distributions.KNEE or HIGHEST
    server: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # gauge -> (t, value)
    power_w: list[tuple[float, float]] = field(default_factory=list)  # (t, all GPUs' watts)

    @property
    def title(self) -> str:
        return f"{self.label} at C={self.asked:g} ({self.basis})"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _series_of(rows: Any, key: str, scale: float) -> list[tuple[float, float]]:
    """(t, value) of the rows holding both, in time order."""
    pairs = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        t, value = _number(row.get("t_s")), _number(row.get(key))
        if t is not None and value is not None:
            pairs.append((t / scale, value))
    return sorted(pairs)


def _level_result(s: Series, label: str) -> LevelResult | None:
    levels = s.host.bench.levels if s.host.bench else []
    return next((result for result in levels if result.level == label), None)


def knee_timeline(s: Series, index: int) -> KneeTimeline | None:
    """A series' timeline at its chosen level; None when that level has neither series."""
    chosen = chosen_level(s)
    if chosen is None:
        return None
    point, basis = chosen
    result = _level_result(s, point.level)
    if result is None:
        return None
    scale = s.time_scale if s.model_time and s.time_scale else 1.0
    server_rows = (result.server_metrics or {}).get("timeline")
    server = {g: found for g in SERVER_GAUGES if (found := _series_of(server_rows, g, scale))}
    telemetry = result.extra("gpu_telemetry")
    gpu_rows = telemetry.get("timeline") if isinstance(telemetry, dict) else None
    power = _series_of(gpu_rows, "power_w", scale)
    if not server and not power:
        return None
    return KneeTimeline(s.label, index, point.level, point.load, basis, server, power)


def knee_timelines(comparison: Comparison) -> list[KneeTimeline]:
    return [t for index, s in enumerate(comparison.series) if (t := knee_timeline(s, index))]
