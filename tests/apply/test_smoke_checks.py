"""Smoke checks over real HTTP (a scripted SSE server on 127.0.0.1) and real subprocesses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures.smoke_server import Reply, chat_server, vllm_stream

from orchestrator import masking
from orchestrator.apply import smoke as checks
from orchestrator.apply.smoke import (
    SmokeResult,
    build_request,
    check_python_function,
    evaluate,
    extract_python,
    run_smoke,
)
from orchestrator.plan.models import PythonFunctionExpect, SmokeCheck, SmokeExpect
from orchestrator.server_client import ChatAnswer, ServerClient

SKY = "Why is the sky blue?"
ADD = "Write a Python function add(a, b)."
CODE_ANSWER = "Here it is:\n\n```python\ndef add(a, b):\n    return a + b\n```\nDone."


def smoke(data: dict[str, Any]) -> SmokeCheck:
    return SmokeCheck.model_validate(data)


def run(base: str, check: SmokeCheck, api_key: str | None = "sk-test") -> SmokeResult:
    with ServerClient(base, api_key=api_key) as client:
        return run_smoke(check, client=client, model="kimi-k2.5")


def test_issue_examples_pass_against_a_streaming_server() -> None:
    replies = {
        SKY: Reply(vllm_stream("Rayleigh scattering makes short wavelengths dominate.",
                               "The user asks about the sky colour.")),
        ADD: Reply(vllm_stream(CODE_ANSWER)),
    }  # fmt: skip
    reasoning = smoke({"name": "reasoning", "prompt": SKY, "thinking": True,
                       "expect": {"reasoning": "present", "content_regex": "(?i)scatter"}})
    code = smoke({"name": "code", "prompt": ADD, "expect": {"python_function": {
        "name": "add", "calls": [{"args": [2, 3], "returns": 5}, {"args": ["a", "b"], "returns": "ab"}]}}})  # fmt: skip
    with chat_server(replies) as (base, requests):
        first = run(base, reasoning)
        second = run(base + "/v1/", code)
    assert (first.passed, first.failures) == (True, [])
    assert first.response.reasoning == "The user asks about the sky colour."
    assert first.response.content.startswith("Rayleigh scattering")
    assert first.response.finish_reason == "stop" and first.response.done
    assert first.response.usage == {"prompt_tokens": 12, "total_tokens": 24, "completion_tokens": 12}
    assert first.response.reasoning_chunks == 4 and first.response.content_chunks == 4
    assert first.response.ttft_s is not None and first.duration_s >= first.response.ttft_s
    assert (second.passed, second.failures) == (True, [])
    assert [(c.args, c.returned, c.passed) for c in second.calls] == [([2, 3], 5, True),
                                                                     (["a", "b"], "ab", True)]
    # What went over the wire.
    assert [r["path"] for r in requests] == ["/v1/chat/completions"] * 2
    body = requests[0]["body"]
    assert body == {
        "model": "kimi-k2.5", "messages": [{"role": "user", "content": SKY}], "max_tokens": 1024,
        "stream": True, "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"thinking": True, "enable_thinking": True},
    }  # fmt: skip
    assert "chat_template_kwargs" not in requests[1]["body"]
    assert requests[0]["authorization"] == "Bearer sk-test"


def test_wrong_expectation_fails_with_a_clear_message() -> None:
    check = smoke({"name": "code", "prompt": ADD, "expect": {
        "contains": ["def add", "multiply"], "min_tokens": 500,
        "python_function": {"name": "add", "calls": [{"args": [2, 3], "returns": 6}]}}})  # fmt: skip
    with chat_server({ADD: Reply(vllm_stream(CODE_ANSWER))}) as (base, _):
        result = run(base, check)
    assert not result.passed
    assert result.failures == [
        "content does not contain 'multiply'; it starts 'Here it is: ```python def add(a, b): "
        "return a + b ``` Done.'",
        "only 13 completion tokens, expected at least 500",
        "python_function: add(2, 3) returned 5, expected 6",
    ]
    assert result.calls[0].passed is False


def test_older_reasoning_content_field_counts_as_reasoning() -> None:
    check = smoke({"name": "r", "prompt": SKY, "expect": {"reasoning": "present"}})
    reply = Reply(vllm_stream("Scattering.", "thinking...", field_name="reasoning_content"))
    with chat_server({SKY: reply}) as (base, _):
        result = run(base, check)
    assert result.passed and result.response.reasoning == "thinking..."


@pytest.mark.parametrize(
    ("reply", "expect", "failure"),
    [
        (Reply(vllm_stream("Blue.", "hmm")), {"reasoning": "absent"},
         "expected no reasoning, got 3 characters of it"),
        (Reply(vllm_stream("<think>hmm</think>Blue.")), {"reasoning": "present"},
         "no reasoning field, but the content holds <think>...</think>: is "
         "service.args.reasoning-parser set?"),
        (Reply(vllm_stream("", "long thoughts", finish="length")), {},
         "the answer's content is empty (finish_reason=length: the token limit ran out first; "
         "raise max_tokens)"),
        (Reply(status=401, body='{"error":"Unauthorized"}'), {},
         "the request did not succeed: HTTP 401: Unauthorized"),
        (Reply(status=404, body='{"error":{"message":"The model `x` does not exist.",'
                                '"type":"NotFoundError","param":"model","code":404}}'), {},
         "the request did not succeed: HTTP 404: The model `x` does not exist."),
        (Reply(vllm_stream("a long answer " * 20), cut_after=3), {},
         "the request did not succeed: the stream ended without `data: [DONE]` (did the server "
         "die mid-answer?)"),
        (Reply([*vllm_stream("partial")[:2],
                json.dumps({"error": {"message": "EngineCore encountered an issue.",
                                      "type": "InternalServerError", "param": None, "code": 500}}),
                "[DONE]"]), {},
         "the request did not succeed: error event in the stream: EngineCore encountered an issue."),
    ],
)  # fmt: skip
def test_unhappy_answers(reply: Reply, expect: dict[str, Any], failure: str) -> None:
    check = smoke({"name": "x", "prompt": SKY, "thinking": False, "expect": expect})
    with chat_server({SKY: reply}) as (base, _):
        result = run(base, check)
    assert result.failures == [failure]


def test_success_false_tolerates_a_failed_request() -> None:
    check = smoke({"name": "x", "prompt": SKY, "expect": {"success": False}})
    with chat_server({SKY: Reply(status=500, body="boom")}) as (base, _):
        result = run(base, check)
    assert result.passed and result.response.error == "HTTP 500: boom"


def test_timeout_and_refused_connection() -> None:
    slow = smoke({"name": "slow", "prompt": SKY, "timeout": "0.3s"})
    with chat_server({SKY: Reply(vllm_stream("x"), delay_s=1.5)}) as (base, _):
        result = run(base, slow)
    assert result.failures == ["the request did not succeed: no complete answer within 0.3 s "
                               "(check.timeout)"]
    dead = run(base, slow)  # the server is gone now
    assert len(dead.failures) == 1
    assert dead.failures[0].startswith("the request did not succeed: request failed: ConnectError")


def test_result_json_is_masked() -> None:
    masking.register("sk-very-secret")
    try:
        check = smoke({"name": "x", "prompt": SKY})
        with chat_server({SKY: Reply(vllm_stream("the key is sk-very-secret"))}) as (base, _):
            result = run(base, check, api_key="sk-very-secret")
        text = json.dumps(result.to_json())
        assert "sk-very-secret" not in text and "***" in text
        assert result.to_json()["request"]["model"] == "kimi-k2.5"
    finally:
        masking.clear()


# --- pure parts ---------------------------------------------------------------------------


def response(content: str = "", **kw: Any) -> ChatAnswer:
    return ChatAnswer(status_code=200, content=content, done=True, **kw)


@pytest.mark.parametrize(
    ("expect", "resp", "failures"),
    [
        ({}, response("hi"), []),
        ({}, response("  "), ["the answer's content is empty"]),
        ({"non_empty": False}, response(""), []),
        ({"json_valid": True}, response('{"a": [1, 2]}'), []),
        ({"json_valid": True}, response('Here:\n```json\n{"a": 1}\n```'), []),
        ({"json_valid": True}, response("{'a': 1}"),
         ["content is not valid JSON (Expecting property name enclosed in double quotes at char 1)"]),
        ({"content_regex": "^\\d+$"}, response("forty-two"),
         ["content does not match /^\\d+$/; it starts 'forty-two'"]),
        ({"min_tokens": 5}, response("x"), ["min_tokens: the server reported no usage (completion_tokens)"]),
        ({"min_tokens": 5}, response("x", usage={"completion_tokens": 5}), []),
        ({"contains": ["a", "b"]}, response("a"), ["content does not contain 'b'; it starts 'a'"]),
    ],
)  # fmt: skip
def test_evaluate(expect: dict[str, Any], resp: ChatAnswer, failures: list[str]) -> None:
    assert evaluate(SmokeExpect.model_validate(expect), resp) == failures


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("```python\nx = 1\n```\n```python\ny = 2\n```", "x = 1\n"),
        ("```py\nx = 1\n```", "x = 1\n"),
        ("text\n```\nz = 3\n```", "z = 3\n"),
        ("def f(): pass", "def f(): pass"),
        ("```python\nunterminated = 1\n", "unterminated = 1\n"),
    ],
)
def test_extract_python(content: str, code: str) -> None:
    assert extract_python(content) == code


def expect_fn(name: str = "f", calls: list[tuple[list[Any], Any]] | None = None) -> PythonFunctionExpect:
    return PythonFunctionExpect.model_validate(
        {"name": name, "calls": [{"args": a, "returns": r} for a, r in (calls or [([1], 1)])]}
    )


@pytest.mark.parametrize(
    ("code", "expect", "failures"),
    [
        ("def f(x):\n    print('noise'); return (x, x)", expect_fn(calls=[([1], [1, 1])]), []),
        ("def f(x): return {'k': x}", expect_fn(calls=[([2], {"k": 2})]), []),
        ("def f(x): return 1/0", expect_fn(), ["python_function: f(1) raised ZeroDivisionError: division by zero"]),
        ("def f(x): return {x}", expect_fn(), ["python_function: f(1) returned {1}, which is not JSON-compatible"]),
        ("def g(x): return x", expect_fn(), ["python_function: no function named 'f' (defined: g)"]),
        ("def f(x) return x", expect_fn(), ["python_function: the code does not run: SyntaxError: expected ':' (<answer>, line 1)"]),
        ("import sys\nsys.exit(0)", expect_fn(), ["python_function: the code does not run: SystemExit: 0"]),
        ("import os\nos._exit(3)", expect_fn(), ["python_function: the harness failed (exit 3): (no output)"]),
        ("import socket\ndef f(x): return x", expect_fn(), []),
    ],
)  # fmt: skip
def test_python_function(code: str, expect: PythonFunctionExpect, failures: list[str]) -> None:
    assert check_python_function(f"```python\n{code}\n```", expect) == failures


def test_python_function_runs_with_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "PYTHON_TIMEOUT_S", 0.5)
    failures = check_python_function("def f(x):\n    while True: pass", expect_fn())
    assert failures == ["python_function: f did not finish within 0.5 s"]


def test_build_request_sets_temperature_and_thinking_off() -> None:
    body = build_request(smoke({"name": "n", "prompt": "p", "thinking": False, "temperature": 0,
                                "max_tokens": 16}), "m")  # fmt: skip
    assert body["temperature"] == 0 and body["max_tokens"] == 16
    assert body["chat_template_kwargs"] == {"thinking": False, "enable_thinking": False}
