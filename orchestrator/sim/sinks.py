"""Turn the engine's tokens into HTTP responses: streamed (SSE) or whole, chat or completion.

A sink is attached to one `Sequence`; the scheduler calls `on_token` once per token (the last
call carries the finish reason) and `on_error` if the engine dies. Streams write one HTTP
chunk per token: the first token's chunk also carries the role chunk, the last one the
finish chunk, the usage chunk (if asked) and `data: [DONE]`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from orchestrator.sim import wire
from orchestrator.sim.failures import ENGINE_DEAD
from orchestrator.sim.http11 import Responder
from orchestrator.sim.scheduler import Sequence
from orchestrator.sim.textgen import THINK_END, THINK_START, Script
from orchestrator.sim.versions import VllmVersion

_THINK_START_JSON_PREFIX = json.dumps(THINK_START)[:-1]  # '"<think>\n' without closing quote
_THINK_END_JSON = json.dumps(THINK_END)


def _engine_dead_event() -> bytes:
    return wire.stream_error_event(ENGINE_DEAD, "InternalServerError", 500) + wire.DONE


def _engine_dead_body() -> bytes:
    return wire.error_body(ENGINE_DEAD, "InternalServerError", None, 500)


class ChatStream:
    """Server-sent events of a chat completion."""

    __slots__ = ("chunks", "include_reasoning", "include_usage", "responder", "script", "split")

    def __init__(
        self,
        responder: Responder,
        script: Script,
        chunks: wire.ChatChunks,
        *,
        split_reasoning: bool,
        include_reasoning: bool,
        include_usage: bool,
    ) -> None:
        self.responder = responder
        self.script = script
        self.chunks = chunks
        self.split = split_reasoning
        self.include_reasoning = include_reasoning
        self.include_usage = include_usage

    def _pieces(self, i: int) -> tuple[str | None, str | None]:
        """(reasoning JSON, content JSON) of token i; (None, None) when it shows nothing."""
        script = self.script
        if not script.thinking:
            return None, script.answer_piece_json(i)
        count = script.reasoning_count
        if i < count:
            piece = script.reasoning_piece_json(i)
            if self.split:
                return (piece if self.include_reasoning else None), None
            if i == 0:
                return None, _THINK_START_JSON_PREFIX + piece[1:]
            return None, piece
        if i == count:  # end of thinking: the parser swallows it
            return None, (None if self.split else _THINK_END_JSON)
        return None, script.answer_piece_json(i - count - 1)

    def on_token(self, seq: Sequence, finish: str | None) -> None:
        n = seq.generated
        reasoning, content = self._pieces(n - 1)
        chunks = self.chunks
        out = chunks.role() if n == 1 else b""
        if finish is None:
            if reasoning is not None or content is not None:
                out += chunks.token(reasoning, content, n)
            if out:
                self.responder.write(out)
            return
        out += chunks.final(reasoning, content, finish, n)
        if self.include_usage:
            out += chunks.usage_chunk(n)
        self.responder.end(out + wire.DONE)

    def on_error(self, seq: Sequence, message: str) -> None:
        self.responder.end(_engine_dead_event())


@dataclass(eq=False, slots=True)
class ChatWhole:
    """A non-streamed chat completion, sent when the last token is ready."""

    responder: Responder
    script: Script
    request_id: str
    created: int
    model: str
    version: VllmVersion
    prompt_tokens: int
    split_reasoning: bool
    include_reasoning: bool
    kv_params: dict[str, Any] | None = None  # a prefill for a remote decode (sim/disagg.py)

    def on_token(self, seq: Sequence, finish: str | None) -> None:
        if finish is None:
            return
        count = seq.generated
        if self.split_reasoning:
            reasoning, content = self.script.parts(count)
            if not self.include_reasoning:
                reasoning = None
        else:
            reasoning, content = None, self.script.inline_text(count)
        body = wire.chat_response(
            self.request_id,
            self.created,
            self.model,
            self.version,
            content=content,
            reasoning=reasoning,
            finish=finish,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=count,
            kv_transfer_params=self.kv_params,
        )
        self.responder.send(200, body, wire.JSON_CONTENT_TYPE)

    def on_error(self, seq: Sequence, message: str) -> None:
        self.responder.send(500, _engine_dead_body(), wire.JSON_CONTENT_TYPE)


class CompletionStream:
    """Server-sent events of a text completion (no reasoning: there is no chat template)."""

    __slots__ = ("chunks", "include_usage", "responder", "script")

    def __init__(
        self,
        responder: Responder,
        script: Script,
        chunks: wire.CompletionChunks,
        *,
        include_usage: bool,
    ) -> None:
        self.responder = responder
        self.script = script
        self.chunks = chunks
        self.include_usage = include_usage

    def on_token(self, seq: Sequence, finish: str | None) -> None:
        n = seq.generated
        data = self.chunks.token(self.script.answer_piece_json(n - 1), finish, n)
        if finish is None:
            self.responder.write(data)
            return
        if self.include_usage:
            data += self.chunks.usage_chunk(n)
        self.responder.end(data + wire.DONE)

    def on_error(self, seq: Sequence, message: str) -> None:
        self.responder.end(_engine_dead_event())


@dataclass(eq=False, slots=True)
class CompletionWhole:
    responder: Responder
    script: Script
    request_id: str
    created: int
    model: str
    prompt_tokens: int
    kv_params: dict[str, Any] | None = None  # a prefill for a remote decode (sim/disagg.py)

    def on_token(self, seq: Sequence, finish: str | None) -> None:
        if finish is None:
            return
        _, text = self.script.parts(seq.generated)
        body = wire.completion_response(
            self.request_id,
            self.created,
            self.model,
            text=text or "",
            finish=finish,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=seq.generated,
            kv_transfer_params=self.kv_params,
        )
        self.responder.send(200, body, wire.JSON_CONTENT_TYPE)

    def on_error(self, seq: Sequence, message: str) -> None:
        self.responder.send(500, _engine_dead_body(), wire.JSON_CONTENT_TYPE)
