"""Prefill/decode disaggregation (sim/disagg.py): `--kv-transfer-config` as vLLM reads it, the
NixlConnector protocol on the wire, and a P/D pair behind the real vllm-router, whose decode
server pays the KV transfer in its time to first token."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from fixtures.router import running_router

from orchestrator.sim.options import parse_serve_args
from orchestrator.sim.profiles import KIMI_NVFP4
from orchestrator.sim.testing import SimulatorProcess, running_simulator

NIXL_BOTH = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
KEY = "pd-test-key"
MESSAGES = [{"role": "user", "content": "Say what prefill and decode disaggregation does, "
                                        "in a handful of words, for the test of the pair."}]


def _role(role: str) -> str:
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role})


def _metric(page: str, name: str, **labels: str) -> float:
    """One sample's value (labels given must all match); 0 when absent."""
    for line in page.splitlines():
        found = re.match(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", line)
        if found and all(f'{k}="{v}"' in found.group(1) for k, v in labels.items()):
            return float(found.group(2))
    return 0.0


def _page(sim: SimulatorProcess) -> str:
    return httpx.get(sim.url("/metrics"), timeout=5).text


def test_the_config_is_read_as_vllm_reads_it() -> None:
    options = parse_serve_args(["m", "--kv-transfer-config", NIXL_BOTH, "--kv-link-gbps", "400"])
    assert options.kv_transfer is not None
    assert (options.kv_transfer.connector, options.kv_transfer.role) == ("NixlConnector", "kv_both")
    assert options.kv_transfer.link_gbps == 400
    assert options.non_default["kv_transfer_config"] == json.loads(NIXL_BOTH)
    assert parse_serve_args(["m"]).kv_transfer is None


@pytest.mark.parametrize(("value", "said"), [
    ("{not json", "expected a JSON object"),
    ('["NixlConnector"]', "expected a JSON object"),
    ('{"kv_connector": "NixlConnector"}', "kv_role: expected one of kv_producer, kv_consumer, kv_both"),
    ('{"kv_role": "kv_both"}', "kv_connector: expected a connector name"),
])  # fmt: skip
def test_a_bad_config_is_a_usage_error(value: str, said: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_serve_args(["m", "--kv-transfer-config", value])
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err


@pytest.fixture(scope="module")
def producer() -> Iterator[SimulatorProcess]:
    with running_simulator(profile="instant", kv_transfer_config=_role("kv_producer"),
                           startup_time_scale=0.0001,
                           env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "5601"}) as sim:
        yield sim


def test_a_prefill_request_answers_with_where_its_kv_is(producer: SimulatorProcess) -> None:
    body = {"messages": MESSAGES, "max_tokens": 50, "kv_transfer_params": {
        "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
        "remote_block_ids": None, "remote_host": None, "remote_port": None}}
    answer = httpx.post(producer.url("/v1/chat/completions"), json=body, timeout=10).json()
    prompt = answer["usage"]["prompt_tokens"]
    assert answer["usage"]["completion_tokens"] == 1  # the prefill and its first token only
    assert answer["choices"][0]["finish_reason"] == "length"
    params = answer["kv_transfer_params"]
    assert params["do_remote_prefill"] is True and params["do_remote_decode"] is False
    assert len(params["remote_block_ids"]) == math.ceil(prompt / 16)
    assert params["remote_request_id"] == answer["id"]
    assert isinstance(params["remote_engine_id"], str) and params["remote_engine_id"]
    assert (params["remote_host"], params["remote_port"], params["tp_size"]) == ("localhost", 5601, 1)
    again = httpx.post(producer.url("/v1/chat/completions"), json=body, timeout=10).json()
    assert again["kv_transfer_params"]["remote_engine_id"] == params["remote_engine_id"]
    assert set(again["kv_transfer_params"]["remote_block_ids"]).isdisjoint(params["remote_block_ids"])
    plain = httpx.post(producer.url("/v1/chat/completions"), timeout=10,
                       json={"messages": MESSAGES, "max_tokens": 3}).json()
    assert plain["kv_transfer_params"] is None and plain["usage"]["completion_tokens"] == 3


def test_a_role_refuses_the_half_it_cannot_serve(producer: SimulatorProcess) -> None:
    params = {"do_remote_prefill": True, "remote_engine_id": "e", "remote_block_ids": [0],
              "remote_host": "localhost", "remote_port": 5600}
    answer = httpx.post(producer.url("/v1/completions"), timeout=10, json={
        "prompt": "hello", "max_tokens": 3, "kv_transfer_params": params})
    assert answer.status_code == 400
    assert "kv_role is kv_producer, it cannot consume remote KV" in answer.json()["error"]["message"]


def test_remote_prefill_without_its_fields_computes_the_prompt_here() -> None:
    with running_simulator(profile="instant", kv_transfer_config=_role("kv_consumer"),
                           startup_time_scale=0.0001) as sim:
        answer = httpx.post(sim.url("/v1/chat/completions"), timeout=10, json={
            "messages": MESSAGES, "max_tokens": 4,
            "kv_transfer_params": {"do_remote_prefill": True}}).json()
        page = _page(sim)
        refused = httpx.post(sim.url("/v1/chat/completions"), timeout=10, json={
            "messages": MESSAGES, "max_tokens": 4, "kv_transfer_params": {"do_remote_decode": True}})
    prompt = answer["usage"]["prompt_tokens"]
    assert answer["usage"]["completion_tokens"] == 4
    assert _metric(page, "vllm:prompt_tokens_by_source_total", source="local_compute") == prompt
    assert _metric(page, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer") == 0
    assert _metric(page, "vllm:nixl_xfer_time_seconds_count") == 0
    assert "Got invalid KVTransferParams (missing remote_engine_id" in sim.log()
    assert refused.status_code == 400 and "kv_role is kv_consumer" in refused.text


GBPS = 0.1  # a slow link, so that the transfer stands out of the step times
MAX_TOKENS = 12


def _expected_transfer(prompt: int) -> float:
    """Model seconds (= wall at time scale 1) to pull prompt-1 tokens' KV over one GPU's link."""
    per_gpu = KIMI_NVFP4.kv_cache_gib * 2**30 / KIMI_NVFP4.kv_cache_tokens
    return (prompt - 1) * per_gpu * 8 / (GBPS * 1e9)


def _sse_text(response: httpx.Response) -> str:
    text = ""
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    return text


@pytest.mark.slow
def test_a_pair_behind_the_real_router_splits_the_work_and_pays_the_transfer() -> None:
    common = {"profile": KIMI_NVFP4.name, "time_scale": 1.0, "startup_time_scale": 0.0001,
              "api_key": KEY}
    with running_simulator(kv_transfer_config=NIXL_BOTH, **common) as prefill, \
            running_simulator(kv_transfer_config=NIXL_BOTH, kv_link_gbps=GBPS, **common) as decode, \
            running_simulator(**common) as whole, \
            running_router(extra=["--vllm-pd-disaggregation", "--prefill", prefill.base_url,
                                  "--decode", decode.base_url],
                           env={"OPENAI_API_KEY": KEY}) as router:  # what it sends the workers
        headers = {"authorization": f"Bearer {KEY}"}
        body = {"model": "moonshotai/Kimi-K2.5", "messages": MESSAGES, "max_tokens": MAX_TOKENS,
                "seed": 7}
        reference = httpx.post(whole.url("/v1/chat/completions"), json=body, headers=headers,
                               timeout=30).json()
        httpx.post(whole.url("/v1/chat/completions"), json=body, headers=headers, timeout=30)
        routed = httpx.post(f"{router.url}/v1/chat/completions", json=body, timeout=30).json()
        streamed = httpx.post(f"{router.url}/v1/chat/completions", timeout=30, json={
            **body, "stream": True, "stream_options": {"include_usage": True}})
        pages = {name: _page(sim) for name, sim in
                 (("prefill", prefill), ("decode", decode), ("whole", whole))}
    expected_text = reference["choices"][0]["message"]["content"]
    prompt = reference["usage"]["prompt_tokens"]
    assert routed["choices"][0]["message"]["content"] == expected_text
    assert routed["usage"] == reference["usage"]
    assert streamed.status_code == 200 and _sse_text(streamed) == expected_text
    _check_the_split(pages, prompt)
    _check_the_transfer_shows_in_ttft(pages, prompt)


def _check_the_split(pages: dict[str, str], prompt: int) -> None:
    """The prefill server computed both prompts and one token each; the decode server
    computed one prompt token each (the last) and generated the answers."""
    p, d = pages["prefill"], pages["decode"]
    by_source = "vllm:prompt_tokens_by_source_total"
    assert _metric(p, by_source, source="local_compute") == 2 * prompt
    assert _metric(p, "vllm:generation_tokens_total") == 2
    assert _metric(p, "vllm:nixl_xfer_time_seconds_count") == 0
    assert _metric(d, by_source, source="local_compute") == 2
    assert _metric(d, by_source, source="external_kv_transfer") == 2 * (prompt - 1)
    assert _metric(d, "vllm:prompt_tokens_total") == 2 * prompt
    assert _metric(d, "vllm:generation_tokens_total") == 2 * MAX_TOKENS
    assert _metric(d, "vllm:nixl_xfer_time_seconds_count") == 2
    per_gpu = KIMI_NVFP4.kv_cache_gib * 2**30 / KIMI_NVFP4.kv_cache_tokens
    assert _metric(d, "vllm:nixl_bytes_transferred_sum") == pytest.approx(
        2 * (prompt - 1) * per_gpu * KIMI_NVFP4.tensor_parallel)


def _check_the_transfer_shows_in_ttft(pages: dict[str, str], prompt: int) -> None:
    """At time scale 1, the decode server's first token waits for the transfer and one step;
    the whole server's for one step with the prompt's prefill."""
    transfer = _expected_transfer(prompt)
    d, w = pages["decode"], pages["whole"]
    assert _metric(d, "vllm:nixl_xfer_time_seconds_sum") == pytest.approx(2 * transfer)
    decode_ttft = _metric(d, "vllm:time_to_first_token_seconds_sum") / 2
    whole_ttft = _metric(w, "vllm:time_to_first_token_seconds_sum") / 2
    assert decode_ttft >= transfer + KIMI_NVFP4.step_seconds(1, 1)
    computed_here = (prompt - 1) * KIMI_NVFP4.prefill_per_token_s
    assert decode_ttft - whole_ttft == pytest.approx(transfer - computed_here, abs=0.25 * transfer)


def _until(check: Callable[[], bool], what: str, budget_s: float = 30.0) -> None:
    """Polls `check` until it holds; the budget only bounds a wait that never ends (a
    simulator starved on a loaded machine answers its metrics page late)."""
    deadline = time.monotonic() + budget_s
    while not check():
        assert time.monotonic() < deadline, f"not seen within {budget_s} s: {what}"
        time.sleep(0.02)


def test_a_pull_waits_in_the_queue_and_a_client_gone_meanwhile_aborts_it() -> None:
    remote = {"do_remote_prefill": True, "remote_engine_id": "e", "remote_block_ids": [0, 1],
              "remote_host": "localhost", "remote_port": 5600}
    with running_simulator(profile="instant", kv_transfer_config=NIXL_BOTH,
                           kv_link_gbps=0.0000001, startup_time_scale=0.0001) as sim, \
            httpx.Client(timeout=30) as client:  # 256 bytes a token at 0.1 kbit/s: 20 s each
        with client.stream("POST", sim.url("/v1/chat/completions"), json={
                "messages": MESSAGES, "max_tokens": 4, "stream": True,
                "kv_transfer_params": remote}) as response:
            assert response.status_code == 200
            _until(lambda: _metric(_page(sim), "vllm:num_requests_waiting") == 1, "waiting 1")
        _until(lambda: _metric(_page(sim), "vllm:request_success_total",
                               finished_reason="abort") == 1, "the abort counted")
        page = _page(sim)
        assert _metric(page, "vllm:num_requests_waiting") == 0
        assert _metric(page, "vllm:nixl_xfer_time_seconds_count") == 0  # never arrived
        answer = client.post(sim.url("/v1/completions"), json={"prompt": "hi", "max_tokens": 2})
        assert answer.json()["usage"]["completion_tokens"] == 2  # the engine goes on
