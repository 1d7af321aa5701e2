"""Request bodies of /v1/chat/completions and /v1/completions: parsed, validated, explained.

Errors carry vLLM's status, type and wording where vLLM has one (facts §2, §5); shape errors
name the field and what was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from orchestrator.sim import wire
from orchestrator.sim.options import SimOptions
from orchestrator.sim.textgen import chat_prompt_tokens, count_tokens
from orchestrator.sim.versions import check_lengths


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param

    def body(self) -> bytes:
        return wire.error_body(self.message, self.type, self.param, self.status)


def _invalid(message: str) -> ApiError:
    return ApiError(400, message, "Bad Request")


@dataclass(frozen=True)
class Generation:
    """What to generate and how to send it."""

    prompt_text: str  # what the answer is about (last user message, or the prompt)
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    continuous_usage: bool
    thinking: bool
    include_reasoning: bool
    ignore_eos: bool
    seed: int | None
    request_id: str | None
    kv_transfer_params: dict[str, Any] | None  # P/D (sim/disagg.py)


def _load(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise _invalid(f"Invalid JSON body: {error}") from None
    if not isinstance(data, dict):
        raise _invalid("The request body must be a JSON object")
    return data


def _typed(data: dict[str, Any], key: str, kind: type, what: str) -> Any:
    """data[key] if it is of `kind` (None if absent); a clear 400 otherwise."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _invalid(f"Field `{key}`: expected {what}, got {json.dumps(value)[:80]}")
    return value


def check_model(data: dict[str, Any], options: SimOptions) -> None:
    model = data.get("model")
    if model in (None, ""):
        return
    if not isinstance(model, str):
        raise _invalid(f"Field `model`: expected a string, got {json.dumps(model)[:80]}")
    if model not in options.served_names:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")


def _message_text(content: Any, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or "type" not in part:
                raise _invalid(f"messages[{index}].content: expected parts like {{'type': 'text', 'text': ...}}")
            if part["type"] == "text":
                texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    raise _invalid(f"messages[{index}].content: expected a string or a list of parts")


def _common(data: dict[str, Any], options: SimOptions, prompt_tokens: int) -> dict[str, Any]:
    stream = bool(_typed(data, "stream", bool, "true or false"))
    stream_options = _typed(data, "stream_options", dict, "an object")
    if stream_options is not None and not stream:
        raise ApiError(
            400, "Stream options can only be defined when `stream=True`.", "BadRequestError"
        )
    so = stream_options or {}
    if stream_options is not None:
        include_usage = bool(so.get("include_usage", options.version.include_usage_default))
    else:
        include_usage = False
    include_usage = include_usage or options.force_include_usage
    continuous = include_usage and bool(so.get("continuous_usage_stats", False))
    field = "max_tokens"
    requested = None
    for key in ("max_completion_tokens", "max_tokens"):
        value = _typed(data, key, int, "a whole number")
        if value is not None:
            field, requested = key, value
            break
    lengths = check_lengths(
        options.version, prompt_tokens, requested, field, options.max_model_len
    )
    if lengths.error is not None:
        raise ApiError(400, lengths.error, "BadRequestError", lengths.param)
    n = _typed(data, "n", int, "a whole number")
    if n is not None and n != 1:
        raise ApiError(400, "The simulator supports n=1 only.", "BadRequestError", "n")
    seed = _typed(data, "seed", int, "a whole number")
    request_id = _typed(data, "request_id", str, "a string")
    return {
        "stream": stream,
        "include_usage": include_usage,
        "continuous_usage": continuous,
        "max_tokens": lengths.max_tokens,
        "ignore_eos": bool(_typed(data, "ignore_eos", bool, "true or false")),
        "seed": seed,
        "request_id": request_id,
        "kv_transfer_params": _typed(data, "kv_transfer_params", dict, "an object"),
    }


def parse_chat(body: bytes, options: SimOptions) -> Generation:
    data = _load(body)
    check_model(data, options)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("Field `messages`: expected a non-empty list of {role, content} objects")
    texts: list[str] = []
    last_user = ""
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _invalid(f"messages[{index}]: expected an object with a `role` string")
        text = _message_text(message.get("content"), index)
        texts.append(text)
        if message["role"] == "user":
            last_user = text
    prompt_tokens = chat_prompt_tokens(texts)
    kwargs = dict(options.default_template_kwargs)
    kwargs.update(_typed(data, "chat_template_kwargs", dict, "an object") or {})
    thinking = bool(kwargs.get("thinking", True)) and bool(kwargs.get("enable_thinking", True))
    tool_choice = data.get("tool_choice")
    ignored = {name for name, _ in options.ignored}
    if tool_choice == "auto" and not {"enable-auto-tool-choice", "tool-call-parser"} <= ignored:
        raise ApiError(
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            "BadRequestError",
        )
    common = _common(data, options, prompt_tokens)
    include_reasoning = _typed(data, "include_reasoning", bool, "true or false")
    return Generation(
        prompt_text=last_user or (texts[-1] if texts else ""),
        prompt_tokens=prompt_tokens,
        thinking=thinking,
        include_reasoning=True if include_reasoning is None else include_reasoning,
        **common,
    )


def parse_completion(body: bytes, options: SimOptions) -> Generation:
    data = _load(body)
    check_model(data, options)
    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _invalid("Field `prompt`: expected a string (the simulator takes one prompt)")
    prompt_tokens = max(1, count_tokens(prompt))
    common = _common(data, options, prompt_tokens)
    return Generation(
        prompt_text=prompt,
        prompt_tokens=prompt_tokens,
        thinking=False,
        include_reasoning=False,
        **common,
    )
