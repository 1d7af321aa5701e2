"""Latency percentiles as a level result holds them (pure).

`vllm bench serve` writes `p<P>_<metric>_ms` for whatever `--metric-percentiles` asked
(`p99_ttft_ms`, `p99.9_itl_ms`) and orch writes its own list (p50, p90, p95, p99 by
default), so the percentiles are read from the keys a level has, never from a fixed list.
A file with `median_<metric>_ms` but no `p50_` key (vLLM's own) gives its median as p50.
The latencies are those of orchestrator/metrics.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from orchestrator.metrics import (
    LATENCIES,
    parse_stat_key,
    percentile_key,
    percentile_stat_key,
    stat_key,
)
from orchestrator.runs.run_records import LevelResult


def _percentile_of(name: str) -> tuple[float, str] | None:
    """"p99.9_itl_ms" -> (99.9, "itl"); None for a mean, a median or any other key."""
    parsed = parse_stat_key(name)
    if parsed is None or not parsed[0].startswith("p"):
        return None
    return float(parsed[0][1:]), parsed[1].name


def level_percentiles(result: LevelResult, *, model_time: bool = True) -> dict[str, float]:
    """Every `pNN_<latency>_ms` figure the level holds, in model time when asked."""
    names = [name for name in (result.model_extra or {}) if _percentile_of(name) is not None]
    out: dict[str, float] = {}
    for name in names:
        value = result.figure(name, model_time=model_time)
        if value is not None:
            out[name] = value
    for metric in LATENCIES:
        median = result.figure(stat_key("median", metric.name), model_time=model_time)
        if percentile_stat_key(50, metric.name) not in out and median is not None:
            out[percentile_stat_key(50, metric.name)] = median
    return out


def available(tables: Iterable[Mapping[str, float]], metric: str) -> list[float]:
    """The percentiles of `metric` present in any of `tables`, ascending (50, 90, 95, 99)."""
    found = {pm[0] for table in tables for name in table
             if (pm := _percentile_of(name)) is not None and pm[1] == metric}
    return sorted(found)


def label(p: float) -> str:
    """99 -> "P99", 99.9 -> "P99.9"."""
    return percentile_key(p).upper()
