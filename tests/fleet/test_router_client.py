"""The router client against the real `vllm-router` in front of two simulator replicas:
workers listed, added, removed; requests counted per worker by the router itself."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
from fixtures.router import running_router

from orchestrator.router_client import RouterClient, parse_counters
from orchestrator.sim.testing import running_simulator

FAST_START = {"startup_time_scale": 0.001}


def _chat(url: str) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code


def test_the_router_counts_each_worker_it_was_given(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        sims = [stack.enter_context(running_simulator("m", profile="instant", **FAST_START))
                for _ in range(2)]
        router = stack.enter_context(running_router([sims[0].base_url], tmp_path / "router.log"))
        with RouterClient(router.url, router.metrics_url) as client:
            assert client.health() == 200
            assert client.workers() == [sims[0].base_url]
            assert client.add(sims[1].base_url)[0]
            assert sorted(client.workers()) == sorted(s.base_url for s in sims)
            before = client.counters()
            assert [_chat(router.url) for _ in range(6)] == [200] * 6
            counted = client.counters().minus(before)
            assert {url: counted.processed.get(url) for url in counted.processed} == {
                sims[0].base_url: 3.0, sims[1].base_url: 3.0}  # round robin
            assert counted.requests == 6 and counted.retries == 0
            assert client.remove(sims[1].base_url)[0]
            assert client.workers() == [sims[0].base_url]


def test_counters_are_read_per_worker_from_the_router_text() -> None:
    text = """# HELP x
vllm_router_processed_requests_total{worker="http://a:1"} 6
vllm_router_cb_outcomes_total{worker="http://a:1",outcome="failure"} 3
vllm_router_cb_outcomes_total{worker="http://a:1",outcome="success"} 3
vllm_router_worker_health{worker="http://a:1"} 0
vllm_router_retries_total{route="/v1/chat/completions"} 3
vllm_router_generate_duration_seconds_sum 1.5
vllm_router_generate_duration_seconds_count 4
"""
    counted = parse_counters(text.splitlines())
    assert counted.processed == {"http://a:1": 6.0}
    assert (counted.failed, counted.succeeded) == ({"http://a:1": 3.0}, {"http://a:1": 3.0})
    assert counted.healthy == {"http://a:1": 0.0} and counted.retries == 3.0
    assert (counted.duration_sum, counted.duration_count) == (1.5, 4.0)
