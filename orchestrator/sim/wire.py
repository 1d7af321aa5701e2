"""Exact bytes of vLLM's JSON bodies and SSE events (facts §1.3, §3, §4, §5).

Chunks are dumped by vLLM with pydantic (`exclude_unset`): compact separators, keys in model
field order, only set fields. They are assembled here from pre-rendered fragments because
this is the hot path of streaming (see benchmarks/sim_capacity.py); tests compare the result
with `json.dumps` of the same dicts.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from orchestrator.sim.versions import VllmVersion

DONE = b"data: [DONE]\n\n"
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def dumps(value: Any) -> str:
    """JSON as Starlette's JSONResponse and pydantic's model_dump_json write it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def error_body(message: str, type_: str, param: str | None, code: int) -> bytes:
    return dumps({"error": {"message": message, "type": type_, "param": param, "code": code}}).encode()


def stream_error_event(message: str, type_: str, code: int) -> bytes:
    # vLLM writes this one with json.dumps defaults: spaces after ':' and ','.
    payload = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def usage(prompt: int, completion: int, *, details: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }
    if details:
        out["prompt_tokens_details"] = None
    return out


def usage_json(prompt: int, completion: int) -> str:
    """`dumps(usage(prompt, completion))`, written directly: a stream asking for
    continuous_usage_stats (orch bench does) carries one in every chunk."""
    return (f'{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion},'
            f'"completion_tokens":{completion}}}')


def model_list(names: list[str], root: str, max_model_len: int) -> bytes:
    created = int(time.time())
    cards = [
        {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "orch-simulator",
            "root": root,
            "parent": None,
            "max_model_len": max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex}",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        for name in names
    ]
    return dumps({"object": "list", "data": cards}).encode()


class ChatChunks:
    """SSE events of one chat completion stream, in vLLM's byte format."""

    __slots__ = ("_head", "_reasoning_keys", "_tail", "_usage_prompt", "continuous")

    def __init__(
        self,
        request_id: str,
        created: int,
        model: str,
        version: VllmVersion,
        *,
        continuous_usage: bool = False,
        prompt_tokens: int = 0,
    ) -> None:
        self._head = (
            f'data: {{"id":{dumps(request_id)},"object":"chat.completion.chunk",'
            f'"created":{created},"model":{dumps(model)},"choices":['
        )
        self._reasoning_keys = version.reasoning_fields
        # 0.11.1-0.15: a validator sets reasoning_content on every delta, so it shows up
        self._tail = ',"reasoning_content":null' if len(self._reasoning_keys) == 2 else ""
        self.continuous = continuous_usage
        self._usage_prompt = prompt_tokens

    def _usage(self, completion: int) -> str:
        if not self.continuous:
            return ""
        return ',"usage":' + usage_json(self._usage_prompt, completion)

    def role(self) -> bytes:
        return (
            f'{self._head}{{"index":0,"delta":{{"role":"assistant","content":""{self._tail}}},'
            f'"logprobs":null,"finish_reason":null}}]{self._usage(0)},"prompt_token_ids":null}}\n\n'
        ).encode()

    def _delta(self, reasoning_json: str | None, content_json: str | None) -> str:
        parts = []
        if content_json is not None:
            parts.append(f'"content":{content_json}')
        if reasoning_json is not None:
            parts.extend(f'"{key}":{reasoning_json}' for key in self._reasoning_keys)
        elif self._tail:
            parts.append(self._tail[1:])
        return "{" + ",".join(parts) + "}"

    def token(self, reasoning_json: str | None, content_json: str | None, completion: int) -> bytes:
        return (
            f'{self._head}{{"index":0,"delta":{self._delta(reasoning_json, content_json)},'
            f'"logprobs":null,"finish_reason":null,"token_ids":null}}]{self._usage(completion)}}}\n\n'
        ).encode()

    def final(
        self, reasoning_json: str | None, content_json: str | None, finish: str, completion: int
    ) -> bytes:
        if reasoning_json is None and content_json is None:
            delta = "{}"
        else:
            delta = self._delta(reasoning_json, content_json)
        return (
            f'{self._head}{{"index":0,"delta":{delta},"logprobs":null,'
            f'"finish_reason":{dumps(finish)},"stop_reason":null,"token_ids":null}}]'
            f"{self._usage(completion)}}}\n\n"
        ).encode()

    def usage_chunk(self, completion: int) -> bytes:
        body = dumps(usage(self._usage_prompt, completion))
        return f'{self._head}],"usage":{body}}}\n\n'.encode()


def chat_response(
    request_id: str,
    created: int,
    model: str,
    version: VllmVersion,
    *,
    content: str | None,
    reasoning: str | None,
    finish: str,
    prompt_tokens: int,
    completion_tokens: int,
    kv_transfer_params: dict[str, Any] | None = None,
) -> bytes:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [],
    }
    for key in version.reasoning_fields:
        message[key] = reasoning
    body = {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "token_ids": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(prompt_tokens, completion_tokens, details=True),
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "kv_transfer_params": kv_transfer_params,
    }
    return dumps(body).encode()


class CompletionChunks:
    """SSE events of one /v1/completions stream (dumped by vLLM without exclude_unset)."""

    __slots__ = ("_head", "_prompt", "continuous")

    def __init__(
        self,
        request_id: str,
        created: int,
        model: str,
        *,
        continuous_usage: bool = False,
        prompt_tokens: int = 0,
    ) -> None:
        self._head = (
            f'data: {{"id":{dumps(request_id)},"object":"text_completion",'
            f'"created":{created},"model":{dumps(model)},"choices":['
        )
        self._prompt = prompt_tokens
        self.continuous = continuous_usage

    def token(self, text_json: str, finish: str | None, completion: int) -> bytes:
        counts = usage_json(self._prompt, completion) if self.continuous else "null"
        finish_json = "null" if finish is None else dumps(finish)
        return (
            f'{self._head}{{"index":0,"text":{text_json},"logprobs":null,'
            f'"finish_reason":{finish_json},"stop_reason":null,"prompt_token_ids":null,'
            f'"token_ids":null}}],"usage":{counts}}}\n\n'
        ).encode()

    def usage_chunk(self, completion: int) -> bytes:
        return f'{self._head}],"usage":{dumps(usage(self._prompt, completion))}}}\n\n'.encode()


def completion_response(
    request_id: str,
    created: int,
    model: str,
    *,
    text: str,
    finish: str,
    prompt_tokens: int,
    completion_tokens: int,
    kv_transfer_params: dict[str, Any] | None = None,
) -> bytes:
    body = {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "token_ids": None,
                "prompt_logprobs": None,
                "prompt_token_ids": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(prompt_tokens, completion_tokens, details=True),
        "kv_transfer_params": kv_transfer_params,
    }
    return dumps(body).encode()
