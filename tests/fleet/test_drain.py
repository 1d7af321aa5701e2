"""What the drain reads: a vLLM replica's requests in flight (every engine summed) and the
router's attempts to a worker still without an outcome."""

from __future__ import annotations

from orchestrator.fleet.drain import in_flight_of, pending_at_router
from orchestrator.router_client import parse_counters


def test_in_flight_sums_running_and_waiting_over_engines() -> None:
    page = """# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 4.0
vllm:num_requests_swapped{engine="0",model_name="m"} 9.0
vllm:num_requests_running_total 7
"""
    assert in_flight_of(page.splitlines()) == 9
    assert in_flight_of(["vllm:num_requests_waiting 1", "vllm:num_requests_running NaN"]) == 1
    assert in_flight_of([]) == 0


def test_pending_at_router_is_attempts_without_an_outcome() -> None:
    text = """vllm_router_processed_requests_total{worker="http://a:1"} 12
vllm_router_cb_outcomes_total{worker="http://a:1",outcome="success"} 9
vllm_router_cb_outcomes_total{worker="http://a:1",outcome="failure"} 1
vllm_router_processed_requests_total{worker="http://b:1"} 4
vllm_router_cb_outcomes_total{worker="http://b:1",outcome="success"} 4
"""
    counters = parse_counters(text.splitlines())
    assert pending_at_router(counters, "http://a:1") == 2
    assert pending_at_router(counters, "http://b:1") == 0
    assert pending_at_router(counters, "http://c:1") == 0
