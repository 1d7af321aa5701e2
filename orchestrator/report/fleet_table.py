"""A fleet's levels in a comparison (pure): for each run benchmarked through vLLM's router,
one row per level with the requests each replica was sent (the router's count), those that
failed, its retries, each replica's own mean latency, the router's own time and CPU, and the
latency it added (the client's mean end-to-end beyond the replicas' own). None when no run
went through a router."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.bench.fleet_table import replica_cell, router_block
from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import MISSING
from orchestrator.runs.run_records import LevelResult
from orchestrator.tables import Column, TableData

TITLE = "The fleet, level by level"


def _each(block: Mapping[str, Any], key: str, in_server: bool = False) -> str:
    rows = [r for r in block.get("replicas") or [] if isinstance(r, Mapping)]
    values = [(r.get("server") or {}).get(key) if in_server else r.get(key) for r in rows]
    if not any(isinstance(v, int | float) for v in values):
        return MISSING
    return "/".join(f"{v:,.0f}" if isinstance(v, int | float) else "?" for v in values)


def _number(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, int | float) and not isinstance(value, bool) else MISSING


def _row(label: str, level: LevelResult, block: Mapping[str, Any]) -> list[str]:
    verdict = (level.limiter or {}).get("name")
    return [label, level.level, replica_cell(level), _each(block, "failed"),
            _number(block.get("retries"), "g"), _each(block, "mean_e2e_ms", in_server=True),
            _number(block.get("duration_mean_ms"), ",.1f"), _number(level.extra("router_added_ms"), ",.1f"),
            _number(block.get("cpu"), ".0%"), str(verdict) if verdict else MISSING]


def fleet_table(comparison: Comparison) -> TableData | None:
    rows = [(s.label, level, block) for s in comparison.series
            for level in (s.host.bench.levels if s.host.bench else [])
            if (block := router_block(level)) is not None]
    if not rows:
        return None
    table = TableData(
        TITLE,
        [Column("Run"), Column("Level", "right"), Column("Requests per replica", "right"),
         Column("Failed per replica", "right"), Column("Retries", "right"),
         Column("Replica latency (ms)", "right", priority=1), Column("Router (ms)", "right", priority=2),
         Column("Added (ms)", "right", priority=1), Column("Router CPU", "right", priority=2),
         Column("Verdict", prose=True)],
        caption="Requests and failed per replica: the router's counts over the level (its "
        "vllm_router_processed_requests_total and circuit-breaker failures), replicas in the order of "
        "their URLs. Replica latency: each replica's own mean end-to-end (its /metrics). Router: its "
        "vllm_router_generate_duration_seconds mean (for a stream, to the replica's answer headers). "
        "Added: the client's mean end-to-end beyond the replicas' own, the router and its hops. Router "
        "CPU: its process's, where it ran on the benchmarking machine (1 core = 100%).",
    )
    for label, level, block in rows:
        table.add(_row(label, level, block))
    return table
