"""The figures of a level benchmarked through vLLM's router (pure): `fleet_evidence(level)`,
from its `router` block (bench/fleet_summary.py) and its own figures; None for a level of one
server. Each figure is None where the level lacks it, and a rule that needs it makes no claim."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.bench.fleet_summary import BLOCK, replicas_mean_e2e_ms
from orchestrator.runs.run_records import LevelResult


@dataclass(frozen=True)
class ReplicaFigures:
    url: str
    processed: float | None  # attempts the router sent it over the level
    failed: float | None  # of them, failed (its circuit breaker's count)
    share: float | None  # of all attempts, 0-1
    scrapes: int | None  # of its /metrics
    max_running: float | None
    mean_running: float | None
    max_waiting: float | None
    mean_e2e_ms: float | None  # its own, per request it finished
    tokens_per_request_s: float | None  # its tokens per second of request time


@dataclass(frozen=True)
class FleetEvidence:
    policy: str | None
    replicas: tuple[ReplicaFigures, ...]
    retries: float | None
    router_cpu: float | None  # its process's CPU seconds per wall second
    router_added_ms: float | None  # client mean E2E minus the replicas' own
    client_e2e_ms: float | None
    replicas_e2e_ms: float | None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _replica(row: Mapping[str, Any]) -> ReplicaFigures:
    found = row.get("server")
    server: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    scrapes = server.get("scrapes")
    return ReplicaFigures(
        url=str(row.get("url", "?")), processed=_number(row.get("processed")),
        failed=_number(row.get("failed")), share=_number(row.get("share")),
        scrapes=scrapes if isinstance(scrapes, int) and not isinstance(scrapes, bool) else None,
        max_running=_number(server.get("max_running")), mean_running=_number(server.get("mean_running")),
        max_waiting=_number(server.get("max_waiting")), mean_e2e_ms=_number(server.get("mean_e2e_ms")),
        tokens_per_request_s=_number(server.get("tokens_per_request_s")))


def busiest_server(level: LevelResult) -> Mapping[str, Any] | None:
    """A fleet level's server view for the server rules (scheduler-cap, kv-cache-bound): the
    own /metrics of the replica that queued most (then ran most), the rules' figures read
    per replica as the plan's caps are; None for a level of one server. The fleet rules run
    first: one replica queueing while another idled is unbalanced before it is a cap."""
    block = level.extra(BLOCK)
    if not isinstance(block, Mapping):
        return None
    servers: list[Mapping[str, Any]] = [
        r["server"] for r in block.get("replicas") or []
        if isinstance(r, Mapping) and isinstance(r.get("server"), Mapping) and r["server"].get("scrapes")]
    if not servers:
        return None
    return max(servers, key=lambda s: (_number(s.get("max_waiting")) or 0.0, _number(s.get("max_running")) or 0.0))


def fleet_evidence(level: LevelResult) -> FleetEvidence | None:
    block = level.extra(BLOCK)
    if not isinstance(block, Mapping):
        return None
    rows = [r for r in block.get("replicas") or [] if isinstance(r, Mapping)]
    replicas = replicas_mean_e2e_ms(block, float(level.completed + level.failed) or None)
    client = level.figure("mean_e2el_ms", model_time=False)
    added = _number(level.extra("router_added_ms"))
    if added is None and client is not None and replicas is not None:
        added = round(client - replicas, 3)
    policy = block.get("policy")
    return FleetEvidence(policy=policy if isinstance(policy, str) else None,
                         replicas=tuple(_replica(r) for r in rows), retries=_number(block.get("retries")),
                         router_cpu=_number(block.get("cpu")), router_added_ms=added,
                         client_e2e_ms=client, replicas_e2e_ms=replicas)
