"""The server's own view of each level (pure): what its `/metrics` said while the level ran.

The benchmark scrapes vLLM's `/metrics` at each level's start, end and every
`metrics_interval` in between and keeps, in the level's result (`server_metrics`), the mean
and peak of each gauge (KV-cache usage, running and waiting requests) and the growth of each
counter (preemptions among them); see orchestrator/bench/server_metrics.py. These say why
the client's curve bends: a full KV cache, requests queueing, preemptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.report.series import Series
from orchestrator.runs.run_records import LevelResult

GAUGES = ("kv_cache_usage", "running", "waiting")


@dataclass(frozen=True)
class ServerLevel:
    level: str
    concurrency: float
    mean: dict[str, float]  # gauge -> mean over the level's scrapes
    peak: dict[str, float]  # gauge -> highest scrape
    preemptions: float | None  # counter growth over the level
    scrapes: int


def _number(block: dict[str, Any], key: str) -> float | None:
    value = block.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def server_level(result: LevelResult) -> ServerLevel | None:
    """A closed or batch level's server view; None without one (metrics off, no scrape)."""
    block = result.server_metrics
    if result.mode == "rate" or not isinstance(block, dict) or not block.get("scrapes"):
        return None
    mean = {g: v for g in GAUGES if (v := _number(block, f"mean_{g}")) is not None}
    peak = {g: v for g in GAUGES if (v := _number(block, f"max_{g}")) is not None}
    return ServerLevel(
        level=result.level,
        concurrency=float(result.max_concurrency or 0),
        mean=mean,
        peak=peak,
        preemptions=_number(block, "delta_preemptions"),
        scrapes=int(block.get("scrapes") or 0),
    )


def server_levels(s: Series) -> list[ServerLevel]:
    """The levels of a series the server reported on, by concurrency."""
    levels = s.host.bench.levels if s.host.bench else []
    found = [view for result in levels if result.completed and (view := server_level(result))]
    return sorted(found, key=lambda v: v.concurrency)


def any_server_view(series: Sequence[Series]) -> bool:
    return any(server_levels(s) for s in series)
