"""What the drain reads: a vLLM replica's requests in flight (every engine summed) and the
router's attempts to a worker still without an outcome."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import pytest
from fixtures.fleet import wait_for
from fixtures.router import running_router

from orchestrator.fleet.drain import (
    ROUTER_STILL_S,
    drain,
    in_flight_of,
    pending_at_router,
    replica_in_flight,
)
from orchestrator.router_client import RouterClient, parse_counters
from orchestrator.sim.testing import running_simulator


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


@pytest.mark.slow
def test_an_attempt_its_client_abandoned_does_not_hold_the_drain(tmp_path: Path) -> None:
    """A client that gives up before the answer's head leaves the router an attempt with no
    outcome for good; the drain tells it from one in transit by its standing still."""
    with contextlib.ExitStack() as stack:
        sim = stack.enter_context(running_simulator(
            "m", profile="tiny-qwen2-vllm-cpu-2-cores", time_scale=5.0, startup_time_scale=0.001))
        router = stack.enter_context(running_router([sim.base_url], tmp_path / "router.log"))
        client = stack.enter_context(RouterClient(router.url, router.metrics_url))
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}
        with pytest.raises(httpx.ReadTimeout):  # not streamed: its head comes at the end
            httpx.post(f"{router.url}/v1/chat/completions", json=body, timeout=0.3)
        wait_for(lambda: replica_in_flight(sim.base_url) == 0, 30, "the request ended")
        assert pending_at_router(client.counters(), sim.base_url) == 1
        assert client.remove(sim.base_url)[0]
        drained = drain(sim.base_url, client, timeout_s=30)
        assert not drained.timed_out and drained.left == 0
        assert drained.router_unanswered == 1
        assert ROUTER_STILL_S <= drained.seconds < ROUTER_STILL_S + 5
