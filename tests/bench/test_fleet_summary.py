"""A fleet level's `router` block from what was read (pure): the router's counts per replica
and their shares, each replica's own /metrics over the level (its histograms' means, whether
it is a simulator, no GPU then), the repeats merged, and the latency the router added."""

from __future__ import annotations

from orchestrator.bench.fleet_summary import (
    NO_GPU_HOST,
    NO_GPU_SIM,
    merge_fleet,
    replicas_mean_e2e_ms,
    router_added_ms,
    summarize_fleet,
)
from orchestrator.bench.samplers import Snapshot
from orchestrator.router_client import RouterCounters

A, B = "http://10.0.0.1:8000", "http://10.0.0.2:8000"


def pages(e2e_s: float, finished: int, tokens: float, simulator: bool) -> list[Snapshot]:
    """A replica's first and last scrape of a level: `finished` requests of `e2e_s` each."""
    sim = {"orch_simulator_info": 1.0} if simulator else {}
    first = {"vllm:num_requests_running": 0.0, "vllm:generation_tokens_total": 100.0,
             "vllm:e2e_request_latency_seconds_sum": 5.0, "vllm:e2e_request_latency_seconds_count": 10.0, **sim}
    last = {"vllm:num_requests_running": 2.0, "vllm:generation_tokens_total": 100.0 + tokens,
            "vllm:e2e_request_latency_seconds_sum": 5.0 + e2e_s * finished,
            "vllm:e2e_request_latency_seconds_count": 10.0 + finished, **sim}
    return [Snapshot(0.0, first), Snapshot(2.0, last)]


def counted() -> RouterCounters:
    return RouterCounters(processed={A: 9.0, B: 3.0}, succeeded={A: 9.0, B: 1.0}, failed={B: 2.0},
                          healthy={A: 1.0, B: 0.0}, retries=2.0, requests=10.0,
                          duration_sum=0.5, duration_count=10.0)


def test_each_replica_is_counted_by_the_router_and_read_from_its_own_metrics() -> None:
    block = summarize_fleet(counted(), {A: pages(0.2, 9, 180.0, True), B: pages(0.6, 1, 20.0, False)},
                            router_cpu=0.12, policy="round_robin")
    a, b = block["replicas"]
    assert (a["url"], a["processed"], a["share"], a["failed"]) == (A, 9.0, 0.75, 0.0)
    assert (b["processed"], b["succeeded"], b["failed"], b["healthy"]) == (3.0, 1.0, 2.0, 0.0)
    assert a["server"]["mean_e2e_ms"] == 200.0 and a["server"]["e2e_count"] == 9.0
    assert a["server"]["tokens_per_request_s"] == 100.0  # 180 tokens over 9 x 0.2 s
    assert a["server"]["max_running"] == 2.0
    assert (a["simulated"], a["gpu"]["reason"]) == (True, NO_GPU_SIM)
    assert (b["simulated"], b["gpu"]["reason"]) == (False, NO_GPU_HOST)
    assert (block["requests"], block["retries"], block["processed"], block["failed"]) == (10.0, 2.0, 12.0, 2.0)
    assert block["duration_mean_ms"] == 50.0 and block["cpu"] == 0.12 and block["policy"] == "round_robin"
    assert replicas_mean_e2e_ms(block) == 240.0  # (9 x 200 + 1 x 600) / 10
    assert router_added_ms(block, 250.0) == 10.0


def test_without_the_routers_counts_the_replicas_are_still_read() -> None:
    block = summarize_fleet(None, {A: pages(0.2, 9, 180.0, True)}, problem="the router's metrics URL is not known")
    (a,) = block["replicas"]
    assert "processed" not in a and a["server"]["mean_e2e_ms"] == 200.0
    assert "requests" not in block and block["problem"] == "the router's metrics URL is not known"


def test_repeats_add_up_their_counts_and_shares_follow() -> None:
    one = summarize_fleet(counted(), {A: pages(0.2, 9, 180.0, True), B: pages(0.6, 1, 20.0, True)})
    two = summarize_fleet(RouterCounters(processed={A: 1.0, B: 7.0}, succeeded={A: 1.0, B: 7.0},
                                         requests=8.0), {A: [], B: []})
    merged = merge_fleet([one, two])
    assert merged is not None
    a, b = merged["replicas"]
    assert (a["processed"], b["processed"], b["failed"]) == (10.0, 10.0, 2.0)
    assert (a["share"], b["share"]) == (0.5, 0.5)
    assert merged["requests"] == 18.0 and len(merged["repeats"]) == 2
    assert merge_fleet([]) is None and merge_fleet([one]) == one


def test_a_request_that_visits_two_replicas_counts_both_halves() -> None:
    """P/D: a prefill and a decode replica each finish every request; the replicas' own time
    per request is the sum of the halves, not their mean (else the router looks slow)."""
    rows = [{"server": {"mean_e2e_ms": 100.0, "e2e_count": 10}},  # prefill
            {"server": {"mean_e2e_ms": 900.0, "e2e_count": 5}},  # decode
            {"server": {"mean_e2e_ms": 900.0, "e2e_count": 5}}]
    assert replicas_mean_e2e_ms({"requests": 10, "replicas": rows}) == 1000.0
    assert router_added_ms({"requests": 10, "replicas": rows}, 1012.0) == 12.0
    pd_router = {"requests": 0.0, "replicas": rows}  # its P/D mode counts no routed request
    assert replicas_mean_e2e_ms(pd_router, sent=10) == 1000.0
    aggregated = {"requests": 20, "replicas": rows}  # each request on one replica
    assert replicas_mean_e2e_ms(aggregated) == 500.0
