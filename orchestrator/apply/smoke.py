"""Smoke checks: one streamed chat completion per check, and what its answer must satisfy.

`run_smoke` sends the check's prompt (thinking on or off through `chat_template_kwargs`,
both the Kimi `thinking` and the Qwen-style `enable_thinking` keys) through the server
client, which reads the SSE stream (reasoning from `delta.reasoning` or the older
`delta.reasoning_content`), then `evaluate`
checks every expectation and says what failed. It never raises for a bad answer or a dead
server: the result carries the failures, and the caller decides (SmokeFailed).

`python_function` runs the answer's first ```python block in a separate interpreter
(`python -I`, a temporary working directory, 10 s timeout) with a harness that calls the
function with each given argument list and returns the results through a JSON round trip.
That is code written by the served model, run on the controller: the checks are meant for
models the user runs themselves.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator import masking
from orchestrator.plan.models import PythonFunctionExpect, SmokeCheck, SmokeExpect
from orchestrator.server_client import ChatAnswer, ServerClient

PYTHON_TIMEOUT_S = 10.0
_SNIPPET = 120
_RESULT_MARK = "@@orch-smoke-result@@ "
_FENCED_PYTHON = re.compile(r"```[ \t]*(?:python|py|python3)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FENCED_ANY = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)


@dataclass
class CallResult:
    args: list[Any]
    expected: Any
    returned: Any = None
    error: str | None = None
    passed: bool = False


@dataclass
class SmokeResult:
    name: str
    passed: bool
    failures: list[str]
    request: dict[str, Any]
    response: ChatAnswer
    duration_s: float
    calls: list[CallResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """For the run folder (already masked)."""
        data = asdict(self)
        return json.loads(masking.dumps(data, default=str))  # type: ignore[no-any-return]


def build_request(check: SmokeCheck, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": check.prompt}],
        "max_tokens": check.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if check.temperature is not None:
        body["temperature"] = check.temperature
    if check.thinking is not None:
        body["chat_template_kwargs"] = {
            "thinking": check.thinking,
            "enable_thinking": check.thinking,
        }
    return body


def run_smoke(check: SmokeCheck, *, client: ServerClient, model: str) -> SmokeResult:
    """Send `check`'s request, read the whole stream, evaluate the expectations."""
    body = build_request(check, model)
    started = time.monotonic()
    response = client.stream_chat(body, timeout=check.timeout)
    if response.timed_out:
        response.error = f"{response.error} (check.timeout)"
    calls: list[CallResult] = []
    failures = evaluate(check.expect, response, calls)
    return SmokeResult(
        name=check.name,
        passed=not failures,
        failures=[masking.mask(f) for f in failures],
        request=body,
        response=response,
        duration_s=round(time.monotonic() - started, 4),
        calls=calls,
    )


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 3] + "...")


def evaluate(
    expect: SmokeExpect, response: ChatAnswer, calls: list[CallResult] | None = None
) -> list[str]:
    """Every expectation that does not hold, one clear sentence each. Pure apart from running
    `python_function` code; `calls` receives the per-call results."""
    if response.error is not None:
        return [f"the request did not succeed: {response.error}"] if expect.success else []
    failures: list[str] = []
    content = response.content
    if expect.non_empty and not content.strip():
        reason = "the answer's content is empty"
        if response.finish_reason == "length":
            reason += " (finish_reason=length: the token limit ran out first; raise max_tokens)"
        failures.append(reason)
    failures += _reasoning_failures(expect, response)
    for needle in expect.contains:
        if needle not in content:
            failures.append(f"content does not contain {needle!r}; it starts {_snippet(content)}")
    if expect.content_regex is not None and not re.search(expect.content_regex, content):
        failures.append(
            f"content does not match /{expect.content_regex}/; it starts {_snippet(content)}"
        )
    if expect.json_valid:
        failures += _json_failures(content)
    if expect.min_tokens is not None:
        got = (response.usage or {}).get("completion_tokens")
        if got is None:
            failures.append("min_tokens: the server reported no usage (completion_tokens)")
        elif got < expect.min_tokens:
            failures.append(f"only {got} completion tokens, expected at least {expect.min_tokens}")
    if expect.python_function is not None:
        failures += check_python_function(content, expect.python_function, calls)
    return failures


def _reasoning_failures(expect: SmokeExpect, response: ChatAnswer) -> list[str]:
    has = bool(response.reasoning.strip())
    if expect.reasoning == "present" and not has:
        if _THINK.search(response.content):
            return [
                "no reasoning field, but the content holds <think>...</think>: is "
                "service.args.reasoning-parser set?"
            ]
        return ["expected reasoning, got none (is thinking on and a reasoning parser set?)"]
    if expect.reasoning == "absent" and has:
        return [f"expected no reasoning, got {len(response.reasoning)} characters of it"]
    return []


def _json_failures(content: str) -> list[str]:
    try:
        json.loads(content)
        return []
    except json.JSONDecodeError as error:
        fenced = _FENCED_ANY.search(content)
        if fenced:
            try:
                json.loads(fenced.group(1))
                return []
            except json.JSONDecodeError:
                pass
        return [f"content is not valid JSON ({error.msg} at char {error.pos})"]


def extract_python(content: str) -> str:
    """The first ```python fenced block of `content`, else its first fenced block, else the
    whole content."""
    for pattern in (_FENCED_PYTHON, _FENCED_ANY):
        match = pattern.search(content)
        if match:
            return match.group(1)
    return content


# Runs in a fresh `python -I`: reads {code, name, calls} on stdin, prints one marked JSON line.
_HARNESS = r"""
import contextlib, json, sys
spec = json.loads(sys.stdin.read())
mark = spec["mark"]
def emit(obj):
    sys.__stdout__.write(mark + json.dumps(obj) + "\n")
    sys.__stdout__.flush()
with contextlib.redirect_stdout(sys.stderr):
    namespace = {"__name__": "__smoke__"}
    try:
        exec(compile(spec["code"], "<answer>", "exec"), namespace)
    except BaseException as error:
        emit({"error": "the code does not run: %s: %s" % (type(error).__name__, error)})
        sys.exit(0)
    function = namespace.get(spec["name"])
    if not callable(function):
        defined = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("__"))
        emit({"error": "no function named %r (defined: %s)" % (spec["name"], ", ".join(defined) or "none")})
        sys.exit(0)
    results = []
    for args in spec["calls"]:
        try:
            value = function(*args)
        except BaseException as error:
            results.append({"raised": "%s: %s" % (type(error).__name__, error)})
            continue
        try:
            results.append({"value": json.loads(json.dumps(value))})
        except (TypeError, ValueError):
            results.append({"not_json": repr(value)})
    emit({"results": results})
"""


def check_python_function(
    content: str, expect: PythonFunctionExpect, calls: list[CallResult] | None = None
) -> list[str]:
    """Run the answer's code with `expect`'s calls; one failure per mismatching call."""
    code = extract_python(content)
    spec = {
        "mark": _RESULT_MARK,
        "code": code,
        "name": expect.name,
        "calls": [list(c.args) for c in expect.calls],
    }
    with tempfile.TemporaryDirectory(prefix="orch-smoke-") as workdir:
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-c", _HARNESS],
                input=json.dumps(spec),
                capture_output=True,
                text=True,
                timeout=PYTHON_TIMEOUT_S,
                cwd=workdir,
                env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"},
            )
        except subprocess.TimeoutExpired:
            return [f"python_function: {expect.name} did not finish within {PYTHON_TIMEOUT_S:g} s"]
    answer = _marked_result(proc.stdout)
    if answer is None:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [f"python_function: the harness failed (exit {proc.returncode}): {tail}"]
    if "error" in answer:
        return [f"python_function: {answer['error']}"]
    return _judge_calls(expect, answer["results"], calls)


def _judge_calls(expect: PythonFunctionExpect, results: list[dict[str, Any]],
                 calls: list[CallResult] | None) -> list[str]:
    """Each call's result against what it should return; the records go to `calls`."""
    failures: list[str] = []
    for call, result in zip(expect.calls, results, strict=True):
        expected = json.loads(json.dumps(call.returns))
        shown = f"{expect.name}({', '.join(json.dumps(a) for a in call.args)})"
        record = CallResult(args=list(call.args), expected=expected)
        if "raised" in result:
            record.error = result["raised"]
            failures.append(f"python_function: {shown} raised {record.error}")
        elif "not_json" in result:
            record.error = f"returned {result['not_json']}, which is not JSON-compatible"
            failures.append(f"python_function: {shown} {record.error}")
        else:
            record.returned = result["value"]
            record.passed = result["value"] == expected
            if not record.passed:
                failures.append(
                    f"python_function: {shown} returned {json.dumps(result['value'])}, "
                    f"expected {json.dumps(expected)}"
                )
        if calls is not None:
            calls.append(record)
    return failures


def _marked_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(_RESULT_MARK):
            data = json.loads(line[len(_RESULT_MARK) :])
            return data if isinstance(data, dict) else None
    return None
