"""Latency tables of a comparison: end-to-end latency, time to first token and inter-token
latency by load, one group per percentile the levels hold (P50, P90, P95, P99, ...)."""

from __future__ import annotations

from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import LOWER, Fmt, Getter, millis, per_level, seconds
from orchestrator.report.percentiles import available, key_of, label
from orchestrator.tables import TableData


def _percentile_getter(p: float, metric: str) -> Getter:
    key = key_of(p, metric)
    return lambda s, point: point.value(key)


def _percentile_table(comparison: Comparison, title: str, metric: str, unit: str, fmt: Fmt) -> TableData:
    found = available((p.percentiles for s in comparison.series for p in s.points), metric)
    groups = [(f"{label(p)} {unit}", _percentile_getter(p, metric), fmt, LOWER) for p in found]
    return per_level(comparison, title, groups)


def latency_table(comparison: Comparison) -> TableData:
    return _percentile_table(comparison, "Latency by load", "e2el", "latency (s)", seconds)


def ttft_table(comparison: Comparison) -> TableData:
    return _percentile_table(comparison, "Time to first token by load", "ttft", "TTFT (ms)", millis)


def itl_table(comparison: Comparison) -> TableData:
    return _percentile_table(comparison, "Inter-token latency by load", "itl", "ITL (ms)", millis)
