"""Byte formats of chunks and bodies, per vLLM version (facts §3-§5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.sim import wire
from orchestrator.sim.versions import VllmVersion, check_lengths, parse_version


def event(data: bytes) -> dict[str, Any]:
    assert data.startswith(b"data: ") and data.endswith(b"\n\n")
    body = data[len(b"data: ") : -2]
    parsed = json.loads(body)
    # compact, as pydantic writes it: re-dumping with compact separators gives the same bytes
    assert json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode() == body
    return parsed


HEAD = {"id": "chatcmpl-abc", "object": "chat.completion.chunk", "created": 1760000000, "model": "kimi"}


def test_the_017_chunk_sequence() -> None:
    chunks = wire.ChatChunks("chatcmpl-abc", 1760000000, "kimi", VllmVersion("0.17.1"), prompt_tokens=12)
    assert event(chunks.role()) == {
        **HEAD,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                     "logprobs": None, "finish_reason": None}],
        "prompt_token_ids": None,
    }  # fmt: skip
    assert event(chunks.token('"Let me"', None, 1)) == {
        **HEAD,
        "choices": [{"index": 0, "delta": {"reasoning": "Let me"}, "logprobs": None,
                     "finish_reason": None, "token_ids": None}],
    }  # fmt: skip
    assert event(chunks.token(None, '" world"', 2))["choices"][0]["delta"] == {"content": " world"}
    final = event(chunks.final(None, '"!"', "stop", 3))["choices"][0]
    assert final == {"index": 0, "delta": {"content": "!"}, "logprobs": None,
                     "finish_reason": "stop", "stop_reason": None, "token_ids": None}  # fmt: skip
    assert event(chunks.final(None, None, "length", 3))["choices"][0]["delta"] == {}
    usage = event(chunks.usage_chunk(128))
    assert usage == {**HEAD, "choices": [],
                     "usage": {"prompt_tokens": 12, "total_tokens": 140, "completion_tokens": 128}}  # fmt: skip
    assert list(usage["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens"]


@pytest.mark.parametrize(
    ("version", "reasoning_delta", "content_delta"),
    [
        ("0.11.0", {"reasoning_content": "x"}, {"content": "y"}),
        ("0.13.0", {"reasoning": "x", "reasoning_content": "x"}, {"content": "y", "reasoning_content": None}),
        ("0.17.1", {"reasoning": "x"}, {"content": "y"}),
        ("0.33.0", {"reasoning": "x"}, {"content": "y"}),
    ],
)  # fmt: skip
def test_reasoning_field_names_by_version(
    version: str, reasoning_delta: dict[str, Any], content_delta: dict[str, Any]
) -> None:
    chunks = wire.ChatChunks("chatcmpl-abc", 1, "m", VllmVersion(version))
    assert event(chunks.token('"x"', None, 1))["choices"][0]["delta"] == reasoning_delta
    assert event(chunks.token(None, '"y"', 2))["choices"][0]["delta"] == content_delta
    body = wire.chat_response("chatcmpl-abc", 1, "m", VllmVersion(version), content="y",
                              reasoning="x", finish="stop", prompt_tokens=1, completion_tokens=2)  # fmt: skip
    message = json.loads(body)["choices"][0]["message"]
    assert {k: v for k, v in message.items() if "reasoning" in k} == {k: "x" for k in reasoning_delta}


def test_continuous_usage_rides_on_every_chunk() -> None:
    chunks = wire.ChatChunks("c", 1, "m", VllmVersion("0.17.1"), continuous_usage=True, prompt_tokens=5)
    assert event(chunks.role())["usage"] == {"prompt_tokens": 5, "total_tokens": 5, "completion_tokens": 0}
    assert event(chunks.token(None, '"a"', 3))["usage"]["completion_tokens"] == 3


def test_the_non_streamed_response_has_every_field_in_order() -> None:
    body = json.loads(wire.chat_response("chatcmpl-abc", 1, "m", VllmVersion("0.17.1"), content="Hi",
                                         reasoning="r", finish="stop", prompt_tokens=12,
                                         completion_tokens=128))  # fmt: skip
    assert list(body) == ["id", "object", "created", "model", "choices", "service_tier",
                          "system_fingerprint", "usage", "prompt_logprobs", "prompt_token_ids",
                          "kv_transfer_params"]  # fmt: skip
    assert list(body["choices"][0]["message"]) == ["role", "content", "refusal", "annotations",
                                                   "audio", "function_call", "tool_calls", "reasoning"]  # fmt: skip
    assert body["usage"] == {"prompt_tokens": 12, "total_tokens": 140, "completion_tokens": 128,
                             "prompt_tokens_details": None}  # fmt: skip


def test_errors() -> None:
    assert wire.error_body("The model `x` does not exist.", "NotFoundError", "model", 404) == (
        b'{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}'
    )
    assert wire.stream_error_event("boom", "InternalServerError", 500) == (
        b'data: {"error": {"message": "boom", "type": "InternalServerError", "param": null, "code": 500}}\n\n'
    )


def test_model_cards_say_simulator() -> None:
    data = json.loads(wire.model_list(["a", "b"], "org/model", 1000))
    assert [c["id"] for c in data["data"]] == ["a", "b"]
    card = data["data"][0]
    assert (card["owned_by"], card["root"], card["max_model_len"]) == ("orch-simulator", "org/model", 1000)
    assert card["permission"][0]["id"].startswith("modelperm-")


def test_completion_chunks() -> None:
    chunks = wire.CompletionChunks("cmpl-1", 1, "m", prompt_tokens=3)
    assert event(chunks.token('" a"', None, 1)) == {
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "text": " a", "logprobs": None, "finish_reason": None,
                     "stop_reason": None, "prompt_token_ids": None, "token_ids": None}],
        "usage": None,
    }  # fmt: skip


V017, V016, V033 = VllmVersion("0.17.1"), VllmVersion("0.16.0"), VllmVersion("0.33.0")


@pytest.mark.parametrize(
    ("version", "prompt", "requested", "max_tokens", "error"),
    [
        (V017, 10, 100, 100, None),
        (V017, 10, None, 990, None),
        (V017, 10, 995, 0, "You passed 10 input tokens and requested 995 output tokens. However, the "
         "model's context length is only 1000 tokens, resulting in a maximum input length of 5 tokens. "
         "Please reduce the length of the input prompt."),
        (V017, 10, 2000, 0, "max_tokens=2000cannot be greater than max_model_len=max_total_tokens=1000. "
         "Please request fewer output tokens."),
        (V017, 10, 0, 0, "max_tokens must be at least 1, got 0."),
        (V016, 1200, None, 0, "This model's maximum context length is 1000 tokens. However, your request "
         "has 1200 input tokens. Please reduce the length of the input messages."),
        (V016, 10, 995, 0, "'max_tokens' or 'max_completion_tokens' is too large: 995. This model's "
         "maximum context length is 1000 tokens and your request has 10 input tokens (995 > 1000 - 10)."),
        (V033, 10, 995, 990, None),
        (V033, 1000, 5, 0, "This model's maximum context length is 1000 tokens. However, your prompt "
         "contains 1000 input tokens, which exceeds this limit even without any output tokens. Please "
         "reduce the length of the input prompt."),
    ],
)  # fmt: skip
def test_context_length_checks(
    version: VllmVersion, prompt: int, requested: int | None, max_tokens: int, error: str | None
) -> None:
    result = check_lengths(version, prompt, requested, "max_tokens", 1000)
    assert (result.max_tokens, result.error) == (max_tokens, error)


@pytest.mark.parametrize(("text", "key"), [("0.17.1", (0, 17, 1)), ("0.17", (0, 17, 0)),
                                            ("v0.33.0rc1", (0, 33, 0)), ("0.18.1.dev3+gabc", (0, 18, 1))])  # fmt: skip
def test_versions_parse(text: str, key: tuple[int, int, int]) -> None:
    assert parse_version(text) == key


def test_a_bad_version_is_explained() -> None:
    with pytest.raises(ValueError, match=r"expected a version such as 0\.17\.1"):
        parse_version("latest")
