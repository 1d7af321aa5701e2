"""The official `openai` client against a real simulator process: streaming and not,
reasoning and usage, errors, the simulator markers, metrics over HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.sim.testing import SimulatorProcess, running_simulator

if TYPE_CHECKING:  # imported where used: ~0.9 s at every collection otherwise
    import openai

KEY = "sk-test-key-1234"
MARKER = "profile=instant; time-scale=0.001"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    with running_simulator(profile="instant", reasoning_parser="kimi_k2", api_key=KEY,
                           served_model_name=["kimi-k2.5", "kimi"], max_model_len=4096) as process:  # fmt: skip
        yield process


@pytest.fixture(scope="module")
def client(sim: SimulatorProcess) -> Iterator[openai.OpenAI]:
    import openai

    with openai.OpenAI(base_url=sim.api_base, api_key=KEY, max_retries=0) as c:
        yield c


def ask(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


@pytest.mark.slow
def test_streaming_with_reasoning_and_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="kimi-k2.5", messages=ask("Why is the sky blue?"), stream=True,
        stream_options={"include_usage": True}, max_tokens=1024,
    )  # fmt: skip
    reasoning, content, finish, usage, roles = [], [], [], None, []
    for chunk in stream:
        assert chunk.model == "kimi-k2.5" and chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            reasoning.append(extra.get("reasoning") or "")
            content.append(choice.delta.content or "")
            roles.append(choice.delta.role)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    text = "".join(content)
    assert roles[0] == "assistant"
    assert "".join(reasoning).startswith('The user asks: "Why is the sky blue?"')
    assert "Rayleigh scattering" in text and "<think>" not in text
    assert finish == ["stop"]
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 400 < usage.completion_tokens < 620


def test_non_streaming_with_reasoning(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model="kimi", messages=ask("Why is the sky blue?"))
    message = response.choices[0].message
    assert response.model == "kimi-k2.5"  # the first served name, even for an alias
    assert response.id.startswith("chatcmpl-")
    assert (message.model_extra or {})["reasoning"].startswith("The user asks")
    assert message.content and "scatter" in message.content
    assert response.choices[0].finish_reason == "stop"
    assert response.usage is not None and response.usage.completion_tokens > 300


def test_thinking_off_has_no_reasoning(client: openai.OpenAI) -> None:
    for kwargs in ({"thinking": False}, {"enable_thinking": False}):
        response = client.chat.completions.create(
            model="kimi-k2.5", messages=ask("Why is the sky blue?"),
            extra_body={"chat_template_kwargs": kwargs},
        )  # fmt: skip
        message = response.choices[0].message
        assert (message.model_extra or {}).get("reasoning") is None
        assert message.content and message.content.startswith("The sky looks blue")


def test_a_python_function_request_gets_working_code(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model="kimi-k2.5", messages=ask("Write a Python function named is_prime(n).")
    )
    content = response.choices[0].message.content or ""
    code = re.search(r"```python\n(.*?)```", content, re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(code.group(1), namespace)
    assert [namespace["is_prime"](n) for n in (2, 4, 13)] == [True, False, True]  # type: ignore[operator]


def test_max_tokens_and_ignore_eos(client: openai.OpenAI) -> None:
    short = client.chat.completions.create(model="kimi-k2.5", messages=ask("hi"), max_tokens=7)
    assert short.choices[0].finish_reason == "length"
    assert short.usage is not None and short.usage.completion_tokens == 7
    assert short.choices[0].message.content is None  # still thinking when cut
    long = client.chat.completions.create(
        model="kimi-k2.5", messages=ask("hi"), max_tokens=900, extra_body={"ignore_eos": True}
    )
    assert long.usage is not None and long.usage.completion_tokens == 900
    assert long.choices[0].finish_reason == "length"


def test_completions_endpoint(client: openai.OpenAI) -> None:
    response = client.completions.create(model="kimi-k2.5", prompt="Why is the sky blue?", max_tokens=20)
    assert response.choices[0].text.startswith("The sky looks blue")
    assert response.usage is not None and response.usage.completion_tokens == 20
    pieces = [c.choices[0].text for c in client.completions.create(
        model="kimi-k2.5", prompt="Why is the sky blue?", max_tokens=20, stream=True) if c.choices]  # fmt: skip
    assert "".join(pieces) == response.choices[0].text


def test_errors(sim: SimulatorProcess, client: openai.OpenAI) -> None:
    import openai

    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="gpt-4", messages=ask("hi"))
    assert not_found.value.body == {"message": "The model `gpt-4` does not exist.",
                                    "type": "NotFoundError", "param": "model", "code": 404}  # fmt: skip
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(model="kimi-k2.5", messages=ask("hi"), max_tokens=4090)
    assert "You passed 8 input tokens and requested 4090 output tokens." in str(too_long.value)
    with (
        openai.OpenAI(base_url=sim.api_base, api_key="wrong", max_retries=0) as bad,
        pytest.raises(openai.AuthenticationError) as denied,
    ):
        bad.models.list()
    assert denied.value.response.json() == {"error": "Unauthorized"}
    with httpx.Client(base_url=sim.base_url) as http:
        assert http.get("/health").status_code == 200  # not behind the key
        assert http.get("/metrics").status_code == 200
        assert http.get("/version").status_code == 200
        assert http.get("/v1/models").status_code == 401
        bad_json = http.post("/v1/chat/completions", content=b"{", headers={"Authorization": f"Bearer {KEY}"})
        assert bad_json.status_code == 400
        assert bad_json.json()["error"]["message"].startswith("Invalid JSON body")
        options = http.post("/v1/chat/completions", json={"messages": ask("x"), "stream_options": {}},
                            headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
        assert options.json()["error"]["message"] == "Stream options can only be defined when `stream=True`."


def test_every_response_says_it_is_simulated(sim: SimulatorProcess, client: openai.OpenAI) -> None:
    with httpx.Client(base_url=sim.base_url) as http:
        for path in ("/health", "/version", "/metrics", "/v1/models", "/nope"):
            assert http.get(path).headers["x-orch-simulator"] == MARKER
        assert http.get("/version").json() == {
            "version": "0.17.1", "orch_simulator": {"profile": "instant", "time_scale": 0.001}}  # fmt: skip
    models = client.models.list()
    assert [m.id for m in models.data] == ["kimi-k2.5", "kimi"]
    assert {m.owned_by for m in models.data} == {"orch-simulator"}
    assert (models.data[0].model_extra or {})["max_model_len"] == 4096
    assert sim.log().splitlines()[0].endswith(
        "orch simulator: this is not vLLM but a simulated server "
        "(profile=instant, time-scale=0.001, vllm-version=0.17.1)")  # fmt: skip
    assert KEY not in sim.log()


def test_stream_bytes_and_request_ids(sim: SimulatorProcess) -> None:
    body = {"model": "kimi-k2.5", "messages": ask("hi"), "stream": True, "max_tokens": 3}
    headers = {"Authorization": f"Bearer {KEY}", "X-Request-Id": "abc123"}
    with httpx.Client(base_url=sim.base_url) as http:
        response = http.post("/v1/chat/completions", json=body, headers=headers)
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    first = json.loads(events[0].removeprefix("data: "))
    assert first["id"] == "chatcmpl-abc123"
    assert events[0].startswith('data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":')
    assert events[0].endswith(',"model":"kimi-k2.5","choices":[{"index":0,"delta":{"role":"assistant",'
                              '"content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}')  # fmt: skip
    assert len(events) == 1 + 3 + 1 + 1  # role, 3 tokens, [DONE], trailing empty
    assert '"finish_reason":"length","stop_reason":null' in events[3]


def test_metrics_count_the_traffic(sim: SimulatorProcess, client: openai.OpenAI) -> None:
    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = httpx.get(sim.url("/metrics")).text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip

    base = (("engine", "0"), ("model_name", "kimi-k2.5"))
    before = scrape()
    client.chat.completions.create(model="kimi-k2.5", messages=ask("hi"), max_tokens=11)
    after = scrape()
    gained = after[("vllm:generation_tokens_total", base)] - before[("vllm:generation_tokens_total", base)]
    assert gained == 11
    length = tuple(sorted((*base, ("finished_reason", "length"))))
    assert after[("vllm:request_success_total", length)] == before[("vllm:request_success_total", length)] + 1
    assert after[("vllm:num_requests_running", base)] == 0
    assert ("vllm:time_to_first_token_seconds_count", base) in after
