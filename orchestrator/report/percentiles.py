"""Latency percentiles as a level result holds them (pure).

`vllm bench serve` writes `p<P>_<metric>_ms` for whatever `--metric-percentiles` asked
(`p99_ttft_ms`, `p99.9_itl_ms`) and orch writes its own list (p50, p90, p95, p99 by
default), so the percentiles are read from the keys a level has, never from a fixed list.
A file with `median_<metric>_ms` but no `p50_` key (vLLM's own) gives its median as p50.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from orchestrator.bench.stats import percentile_key
from orchestrator.runs.records import LevelResult

METRICS = ("ttft", "itl", "e2el")
KEY = re.compile(r"^p(?P<p>\d+(?:\.\d+)?)_(?P<metric>[a-z0-9_]+)_ms$")


def key_of(p: float, metric: str) -> str:
    """(99, "ttft") -> "p99_ttft_ms"."""
    return f"{percentile_key(p)}_{metric}_ms"


def level_percentiles(result: LevelResult, *, model_time: bool = True) -> dict[str, float]:
    """Every `pNN_<metric>_ms` figure of METRICS the level holds, in model time when asked."""
    names = [name for name in (result.model_extra or {}) if _metric(name) in METRICS]
    out: dict[str, float] = {}
    for name in names:
        value = result.figure(name, model_time=model_time)
        if value is not None:
            out[name] = value
    for metric in METRICS:
        median = result.figure(f"median_{metric}_ms", model_time=model_time)
        if key_of(50, metric) not in out and median is not None:
            out[key_of(50, metric)] = median
    return out


def _metric(name: str) -> str | None:
    found = KEY.match(name)
    return found["metric"] if found else None


def available(tables: Iterable[Mapping[str, float]], metric: str) -> list[float]:
    """The percentiles of `metric` present in any of `tables`, ascending (50, 90, 95, 99)."""
    found = {float(m["p"]) for table in tables for name in table if (m := KEY.match(name)) and m["metric"] == metric}
    return sorted(found)


def label(p: float) -> str:
    """99 -> "P99", 99.9 -> "P99.9"."""
    return percentile_key(p).upper()
