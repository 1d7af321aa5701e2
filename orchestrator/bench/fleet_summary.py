"""A fleet's level in figures (pure): the router's `router` block of a level file, from what
the fleet sampler (fleet_level.py) read during each repeat.

Per replica (a worker of the router): the requests the router counted for it over the level
(`processed`: attempts sent to it, a failed one and its retry elsewhere both counted;
`succeeded` and `failed`: its circuit breaker's outcomes), its `share` of the attempts, its
health and circuit at the end, and its own `/metrics` over the level (running and waiting
gauges, generation tokens, the mean TTFT and end-to-end latency of the requests it finished,
and `tokens_per_request_s`: its tokens per second of request time, one stream's pace). For
the whole router: its `requests` and `retries` over the level, `duration_mean_ms` (its
`vllm_router_generate_duration_seconds` mean: for a stream, the time to the worker's answer
headers, not to its last token) and, where orch could read the router's process, `cpu`
(CPU seconds per wall second, 1.0 = one core).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.bench.samplers import Snapshot
from orchestrator.bench.server_metrics import summarize_snapshots
from orchestrator.router_client import RouterCounters

BLOCK = "router"
SIM_INFO = "orch_simulator_info"  # the simulator's own gauge: a replica that is one
# the replicas' histograms the block reads (sum and count deltas over the level)
HISTOGRAMS = {"e2e": "vllm:e2e_request_latency_seconds", "ttft": "vllm:time_to_first_token_seconds"}
EXTRA_NAMES = (SIM_INFO, *(f"{name}_{part}" for name in HISTOGRAMS.values() for part in ("sum", "count")))
SERVER_KEYS = ("scrapes", "source", "problem", "max_running", "mean_running", "max_waiting",
               "mean_waiting", "max_kv_cache_usage", "delta_preemptions", "delta_generation_tokens",
               "delta_requests_finished", "server_output_throughput")
NO_GPU_SIM = "a simulator replica has no GPU"
NO_GPU_HOST = "no GPU sampler for this replica's host (orch bench --url reads no host)"


def _mean_ms(snapshots: Sequence[Snapshot], name: str) -> tuple[float | None, float]:
    """The histogram's mean over the snapshots (ms) and how many it counted."""
    if len(snapshots) < 2:
        return None, 0.0
    first, last = snapshots[0].values, snapshots[-1].values
    total = last.get(f"{name}_sum", 0.0) - first.get(f"{name}_sum", 0.0)
    count = last.get(f"{name}_count", 0.0) - first.get(f"{name}_count", 0.0)
    return (round(total / count * 1000, 3) if count > 0 else None), max(count, 0.0)


def replica_server(snapshots: Sequence[Snapshot]) -> dict[str, Any]:
    """One replica's own view of the level, from its /metrics snapshots."""
    summary = summarize_snapshots(snapshots)
    out = {key: summary[key] for key in SERVER_KEYS if key in summary}
    plain = [s for s in snapshots if s.values]
    e2e, finished = _mean_ms(plain, HISTOGRAMS["e2e"])
    ttft, _ = _mean_ms(plain, HISTOGRAMS["ttft"])
    out["mean_e2e_ms"], out["mean_ttft_ms"], out["e2e_count"] = e2e, ttft, finished
    tokens = out.get("delta_generation_tokens")
    busy_s = (e2e or 0.0) * finished / 1000
    out["tokens_per_request_s"] = round(tokens / busy_s, 2) if tokens and busy_s > 0 else None
    return out


def _gpu(url: str, simulated: bool, gpus: Mapping[str, Any]) -> Any:
    if url in gpus:
        return gpus[url]
    return {"source": "none", "reason": NO_GPU_SIM if simulated else NO_GPU_HOST}


def summarize_fleet(counted: RouterCounters | None, replicas: Mapping[str, Sequence[Snapshot]],
                    *, gpus: Mapping[str, Any] | None = None, router_cpu: float | None = None,
                    policy: str | None = None, problem: str = "") -> dict[str, Any]:
    """One repeat's `router` block: the router's counts (None: its metrics were not read)
    and each replica's /metrics snapshots, by worker URL."""
    urls = sorted({*replicas, *(counted.processed if counted else {})})
    attempts = sum((counted.processed if counted else {}).values())
    rows = []
    for url in urls:
        snapshots = replicas.get(url, [])
        simulated = any(SIM_INFO in s.values for s in snapshots)
        row: dict[str, Any] = {"url": url}
        if counted is not None:
            processed = counted.processed.get(url, 0.0)
            row |= {"processed": processed, "succeeded": counted.succeeded.get(url, 0.0),
                    "failed": counted.failed.get(url, 0.0),
                    "share": round(processed / attempts, 4) if attempts else None,
                    "healthy": counted.healthy.get(url), "circuit": counted.circuit.get(url)}
        row |= {"simulated": simulated, "server": replica_server(snapshots),
                "gpu": _gpu(url, simulated, gpus or {})}
        rows.append(row)
    out: dict[str, Any] = {"policy": policy, "workers": len(urls)}
    if counted is not None:
        out |= {"requests": counted.requests, "retries": counted.retries,
                "processed": attempts, "failed": sum(counted.failed.values()),
                "duration_mean_ms": (round(counted.duration_sum / counted.duration_count * 1000, 3)
                                     if counted.duration_count > 0 else None)}
    out |= {"cpu": router_cpu, "replicas": rows}
    if problem:
        out["problem"] = problem
    return out


COUNTS = ("processed", "succeeded", "failed")


def merge_fleet(repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A level's `router` block from its repeats': the counts summed over the repeats, the
    gauges and latencies the last repeat's (each repeat's block kept under `repeats`)."""
    if not repeats:
        return None
    if len(repeats) == 1:
        return dict(repeats[0])
    merged = dict(repeats[-1])
    for key in ("requests", "retries", "processed", "failed"):
        if all(isinstance(r.get(key), int | float) for r in repeats):
            merged[key] = sum(r[key] for r in repeats)
    rows = []
    for row in repeats[-1].get("replicas") or []:
        same = [r for rep in repeats for r in rep.get("replicas") or [] if r.get("url") == row.get("url")]
        summed = {k: sum(r.get(k) or 0.0 for r in same) for k in COUNTS if k in row}
        rows.append({**row, **summed})
    total = sum(r.get("processed") or 0.0 for r in rows)
    for row in rows:
        if "processed" in row:
            row["share"] = round(row["processed"] / total, 4) if total else None
    merged["replicas"], merged["repeats"] = rows, [dict(r) for r in repeats]
    return merged


def replicas_mean_e2e_ms(block: Mapping[str, Any], sent: float | None = None) -> float | None:
    """The replicas' own time per routed request over the level: their mean end-to-end
    latency weighted by what each finished, times the replicas a request visits (P/D: a
    prefill and a decode replica each finish it, so two; None: no replica reported one).
    The requests are the router's count, or `sent` (the client's) where it keeps none (its
    P/D mode counts no routed request)."""
    total = count = 0.0
    for row in block.get("replicas") or []:
        server = row.get("server") or {}
        mean, n = server.get("mean_e2e_ms"), server.get("e2e_count") or 0.0
        if isinstance(mean, int | float) and n:
            total, count = total + mean * n, count + n
    if not count:
        return None
    requests = block.get("requests") or sent
    hops = max(1, round(count / requests)) if isinstance(requests, int | float) and requests else 1
    return round(total / count * hops, 3)


def router_added_ms(block: Mapping[str, Any] | None, client_e2e_ms: float | None,
                    sent: float | None = None) -> float | None:
    """What the client waited beyond the replicas' own latency: the router and its hops."""
    if not block or client_e2e_ms is None:
        return None
    replicas = replicas_mean_e2e_ms(block, sent)
    return round(client_e2e_ms - replicas, 3) if replicas is not None else None
