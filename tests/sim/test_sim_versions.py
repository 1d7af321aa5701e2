"""`--vllm-version` switches what a client can notice: field names, usage default, error and
start-up wording; the reasoning parser decides where the reasoning goes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from orchestrator.sim.testing import SimulatorProcess, start_simulator

VERSIONS = ("0.11.0", "0.13.0", "0.17.1", "0.33.0")


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimulatorProcess]]:
    started = {v: start_simulator(profile="instant", reasoning_parser="kimi_k2", vllm_version=v,
                                  max_model_len=2000) for v in VERSIONS}  # fmt: skip
    started["no-parser"] = start_simulator(profile="instant")
    started["append-think"] = start_simulator(profile="instant", reasoning_parser="minimax_m2_append_think")
    try:
        for sim in started.values():
            sim.wait_ready()
        yield started
    finally:
        for sim in started.values():
            sim.stop()


def stream(sim: SimulatorProcess, **extra: object) -> list[dict[str, object]]:
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True, **extra}
    text = httpx.post(sim.url("/v1/chat/completions"), json=body).text
    return [json.loads(e.removeprefix("data: ")) for e in text.split("\n\n") if e and e != "data: [DONE]"]


@pytest.mark.parametrize(
    ("version", "fields"),
    [("0.11.0", {"reasoning_content"}), ("0.13.0", {"reasoning", "reasoning_content"}),
     ("0.17.1", {"reasoning"}), ("0.33.0", {"reasoning"})],
)  # fmt: skip
def test_reasoning_fields(sims: dict[str, SimulatorProcess], version: str, fields: set[str]) -> None:
    events = stream(sims[version], max_tokens=3)
    delta = events[1]["choices"][0]["delta"]  # type: ignore[index]
    assert set(delta) == fields
    message = httpx.post(sims[version].url("/v1/chat/completions"),
                         json={"messages": [{"role": "user", "content": "hi"}]}).json()["choices"][0]["message"]  # fmt: skip
    assert {k for k in message if "reasoning" in k} == fields
    assert all(message[k] for k in fields)


@pytest.mark.parametrize(("version", "usage"), [("0.17.1", True), ("0.33.0", False)])
def test_usage_default_when_stream_options_are_given(
    sims: dict[str, SimulatorProcess], version: str, usage: bool
) -> None:
    events = stream(sims[version], max_tokens=3, stream_options={})
    assert ("usage" in events[-1]) is usage
    assert "usage" not in stream(sims[version], max_tokens=3)[-1]


@pytest.mark.parametrize(
    ("version", "wording"),
    [("0.11.0", "'max_tokens' or 'max_completion_tokens' is too large: 1999."),
     ("0.17.1", "You passed 8 input tokens and requested 1999 output tokens."),
     ("0.33.0", None)],
)  # fmt: skip
def test_too_long_wording(sims: dict[str, SimulatorProcess], version: str, wording: str | None) -> None:
    response = httpx.post(sims[version].url("/v1/chat/completions"),
                          json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1999})  # fmt: skip
    if wording is None:  # 0.33 clamps to the remaining context
        assert response.status_code == 200
        return
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"].startswith(wording)
    assert (error["type"], error["code"]) == ("BadRequestError", 400)


@pytest.mark.parametrize(
    ("version", "line"),
    [("0.17.1", "Starting vLLM API server 0 on http://127.0.0.1:"), ("0.33.0", "Starting vLLM server on http://127.0.0.1:")],
)  # fmt: skip
def test_startup_wording(sims: dict[str, SimulatorProcess], version: str, line: str) -> None:
    assert line in sims[version].log()


def test_without_a_parser_the_reasoning_stays_in_the_content(sims: dict[str, SimulatorProcess]) -> None:
    for name in ("no-parser", "append-think"):
        events = stream(sims[name], max_tokens=600)
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])  # type: ignore[index,union-attr]
        assert text.startswith("<think>\nThe user asks")
        assert "</think>\n\nHere is a detailed answer." in text
        assert all("reasoning" not in e["choices"][0]["delta"] for e in events if e["choices"])  # type: ignore[index,operator]
