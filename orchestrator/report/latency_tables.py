"""Latency tables of a comparison: one per latency of orchestrator/metrics.py (end-to-end
latency first, then TTFT, content TTFT, TPOT and ITL) by load, one group per percentile
the levels hold (P50, P90, P95, P99, ...). A latency no level has percentiles of (vLLM's
own files have no content TTFT) has no table."""

from __future__ import annotations

from orchestrator.metrics import BY_NAME, Metric, headline_first, percentile_stat_key
from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import LOWER, Fmt, Getter, millis, per_level, seconds
from orchestrator.report.percentiles import available, label
from orchestrator.tables import TableData


def _percentile_getter(p: float, metric: str) -> Getter:
    key = percentile_stat_key(p, metric)
    return lambda s, point: point.value(key)


def latency_table(comparison: Comparison, name: str = "e2el") -> TableData:
    """`name`'s percentiles by load (`Latency by load: P50 latency (s)`)."""
    metric = BY_NAME[name]
    unit: str = "s"
    fmt: Fmt = seconds
    if not metric.seconds:
        unit, fmt = metric.unit, millis
    found = available((p.percentiles for s in comparison.series for p in s.points), name)
    groups = [(f"{label(p)} {metric.label} ({unit})", _percentile_getter(p, name), fmt, LOWER) for p in found]
    return per_level(comparison, f"{metric.title} by load", groups)


def latency_tables(comparison: Comparison) -> list[TableData]:
    """Every latency's table that has figures, the headline latency's first."""
    shown: list[Metric] = [m for m in headline_first() if _has_percentiles(comparison, m)]
    return [latency_table(comparison, m.name) for m in shown]


def _has_percentiles(comparison: Comparison, metric: Metric) -> bool:
    return bool(available((p.percentiles for s in comparison.series for p in s.points), metric.name))
