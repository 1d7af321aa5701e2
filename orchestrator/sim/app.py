"""Routes of the simulated vLLM API server: what each endpoint answers (facts §1).

`--api-key` guards paths starting with /v1 only, as vLLM's middleware does; /health,
/metrics and /version stay open. Every response also carries the `x-orch-simulator` header
(added by the HTTP layer).
"""

from __future__ import annotations

import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from orchestrator.sim import disagg, wire
from orchestrator.sim.api_requests import ApiError, Generation, parse_chat, parse_completion
from orchestrator.sim.dcgm_stand_in import STAND_IN_DCGM_PATH
from orchestrator.sim.dcgm_stand_in import render as render_dcgm
from orchestrator.sim.engine import Engine
from orchestrator.sim.failures import ENGINE_DEAD
from orchestrator.sim.http11 import Request, Responder
from orchestrator.sim.logs import VllmLog
from orchestrator.sim.metrics import EngineMetrics, render
from orchestrator.sim.options import SimOptions
from orchestrator.sim.profiles import KV_BLOCK_SIZE
from orchestrator.sim.scheduler import Sequence
from orchestrator.sim.sinks import ChatStream, ChatWhole, CompletionStream, CompletionWhole
from orchestrator.sim.textgen import build_script

Route = Callable[[Request, Responder], None]

_NOT_FOUND = b'{"detail":"Not Found"}'
_NOT_ALLOWED = b'{"detail":"Method Not Allowed"}'
_UNAUTHORIZED = b'{"error":"Unauthorized"}'


class SimApp:
    def __init__(
        self, options: SimOptions, engine: Engine, metrics: EngineMetrics, log: VllmLog
    ) -> None:
        self.o = options
        self.engine = engine
        self.metrics = metrics
        self.log = log
        self.model = options.served_names[0]
        self.counter = 0  # keys the deterministic response of requests without a seed
        self.routes: dict[str, dict[str, Route]] = {
            "/health": {"GET": self.health},
            "/ping": {"GET": self.health, "POST": self.health},
            "/version": {"GET": self.version},
            "/load": {"GET": self.load},
            "/metrics": {"GET": self.metrics_page},
            "/v1/models": {"GET": self.models},
            "/v1/chat/completions": {"POST": self.chat},
            "/v1/completions": {"POST": self.completions},
        }
        if engine.gpus is not None:  # a profile with GPUs: what their DCGM exporter would say
            self.routes[STAND_IN_DCGM_PATH] = {"GET": self.stand_in_dcgm}

    def handle(self, request: Request, responder: Responder) -> None:
        try:
            self._route(request, responder)
        except ApiError as error:
            responder.send(error.status, error.body(), wire.JSON_CONTENT_TYPE)
        except Exception as error:  # a bug must not take the server down
            self.log.error("APIServer", "simulator.py:1", "".join(traceback.format_exception(error)).rstrip())
            body = wire.error_body(str(error), "InternalServerError", None, 500)
            responder.send(500, body, wire.JSON_CONTENT_TYPE)

    def _route(self, request: Request, responder: Responder) -> None:
        methods = self.routes.get(request.path)
        if methods is None:
            responder.send(404, _NOT_FOUND, wire.JSON_CONTENT_TYPE)
            return
        key = self.o.api_key
        if (
            key is not None
            and request.path.startswith("/v1")
            and request.headers.get("authorization") != f"Bearer {key}"
        ):
            responder.send(401, _UNAUTHORIZED, wire.JSON_CONTENT_TYPE)
            return
        method = "GET" if request.method == "HEAD" and "GET" in methods else request.method
        route = methods.get(method)
        if route is None:
            allow = ", ".join(sorted(methods))
            responder.send(405, _NOT_ALLOWED, wire.JSON_CONTENT_TYPE, [("allow", allow)])
            return
        route(request, responder)

    # plain endpoints --------------------------------------------------------------
    def health(self, request: Request, responder: Responder) -> None:
        responder.send(503 if self.engine.dead else 200)

    def version(self, request: Request, responder: Responder) -> None:
        body = {
            "version": self.o.version.text,
            "orch_simulator": {"profile": self.o.profile.name, "time_scale": self.o.time_scale},
        }
        responder.send(200, wire.dumps(body).encode(), wire.JSON_CONTENT_TYPE)

    def load(self, request: Request, responder: Responder) -> None:
        running, waiting, _ = self.engine.counts()
        body = wire.dumps({"server_load": running + waiting}).encode()
        responder.send(200, body, wire.JSON_CONTENT_TYPE)

    def metrics_page(self, request: Request, responder: Responder) -> None:
        info = {
            "profile": self.o.profile.name,
            "time_scale": repr(self.o.time_scale),
            "vllm_version": self.o.version.text,
        }
        cache = {
            "block_size": "16",
            "cache_dtype": self.o.cache_dtype,
            "gpu_memory_utilization": "0.9",
            "num_gpu_blocks": str(self.o.kv_cache_tokens // KV_BLOCK_SIZE),
        }
        kv = self.o.kv_transfer
        text = render(self.metrics, self.model, self.engine.counts(), info, cache,
                      kv.connector if kv is not None else None)
        responder.send(200, text.encode(), wire.METRICS_CONTENT_TYPE)

    def stand_in_dcgm(self, request: Request, responder: Responder) -> None:
        gpus = self.engine.gpus
        assert gpus is not None and gpus.model is not None
        text = render_dcgm(gpus.read(), self.o.tensor_parallel * self.o.data_parallel, gpus.model.name)
        responder.send(200, text.encode(), wire.METRICS_CONTENT_TYPE)

    def models(self, request: Request, responder: Responder) -> None:
        body = wire.model_list(self.o.served_names, self.o.model, self.o.max_model_len)
        responder.send(200, body, wire.JSON_CONTENT_TYPE)

    # generation -------------------------------------------------------------------
    def _key(self, seed: int | None) -> str:
        if seed is not None:
            return f"seed:{seed}"
        key = str(self.counter)
        self.counter += 1
        return key

    def _request_id(self, prefix: str, request: Request, given: str | None) -> str:
        return prefix + (request.headers.get("x-request-id") or given or uuid.uuid4().hex)

    def _refuse_if_dead(self) -> None:
        if self.engine.dead:
            raise ApiError(500, ENGINE_DEAD, "InternalServerError")

    def _part(self, gen: Generation) -> disagg.Part:
        """What the request's kv_transfer_params ask of this server (P/D, sim/disagg.py)."""
        try:
            part = disagg.plan(gen.kv_transfer_params, self.o.kv_transfer, gen.prompt_tokens)
        except ValueError as error:
            raise ApiError(400, str(error), "BadRequestError", "kv_transfer_params") from None
        if part.note:
            self.log.warning("APIServer", "nixl_connector.py:1", part.note)
        return part

    def _sequence(self, gen: Generation, natural: int | None, part: disagg.Part) -> Sequence:
        if part.prefill_only:  # the prompt and one token, ending "length" as vLLM's does
            return Sequence(gen.prompt_tokens, 1, None)
        seq = Sequence(gen.prompt_tokens, gen.max_tokens, None if gen.ignore_eos else natural)
        seq.remote_tokens = part.remote_tokens
        return seq

    def _kv_params(self, part: disagg.Part, gen: Generation, request_id: str) -> dict[str, Any] | None:
        kv = self.o.kv_transfer
        if kv is None or not part.prefill_only or gen.stream:
            return None
        return kv.produced(request_id, gen.prompt_tokens, KV_BLOCK_SIZE, self.o.tensor_parallel)

    def _submit(self, seq: Sequence, responder: Responder) -> None:
        engine = self.engine
        responder.on_close = lambda: engine.abort(seq)
        kv = self.o.kv_transfer
        if kv is None or not seq.remote_tokens:
            engine.submit(seq)
            return
        per_gpu = self.o.kv_bytes_per_token
        seconds = kv.seconds(seq.remote_tokens, per_gpu)
        engine.submit_transferred(seq, seconds, seq.remote_tokens * per_gpu * self.o.tensor_parallel)

    def chat(self, request: Request, responder: Responder) -> None:
        self._refuse_if_dead()
        gen = parse_chat(request.body, self.o)
        part = self._part(gen)
        script = build_script(gen.prompt_text, self._key(gen.seed), thinking=gen.thinking)
        request_id = self._request_id("chatcmpl-", request, gen.request_id)
        created = int(time.time())
        seq = self._sequence(gen, script.natural_tokens, part)
        split = self.o.splits_reasoning
        if gen.stream:
            chunks = wire.ChatChunks(
                request_id,
                created,
                self.model,
                self.o.version,
                continuous_usage=gen.continuous_usage,
                prompt_tokens=gen.prompt_tokens,
            )
            seq.sink = ChatStream(
                responder,
                script,
                chunks,
                split_reasoning=split,
                include_reasoning=gen.include_reasoning,
                include_usage=gen.include_usage,
            )
            responder.start_stream(200, wire.SSE_CONTENT_TYPE)
        else:
            seq.sink = ChatWhole(
                responder,
                script,
                request_id,
                created,
                self.model,
                self.o.version,
                gen.prompt_tokens,
                split,
                gen.include_reasoning,
                self._kv_params(part, gen, request_id),
            )
        self._submit(seq, responder)

    def completions(self, request: Request, responder: Responder) -> None:
        self._refuse_if_dead()
        gen = parse_completion(request.body, self.o)
        part = self._part(gen)
        script = build_script(gen.prompt_text, self._key(gen.seed), thinking=False)
        request_id = self._request_id("cmpl-", request, gen.request_id)
        created = int(time.time())
        seq = self._sequence(gen, script.natural_tokens, part)
        if gen.stream:
            chunks = wire.CompletionChunks(
                request_id,
                created,
                self.model,
                continuous_usage=gen.continuous_usage,
                prompt_tokens=gen.prompt_tokens,
            )
            seq.sink = CompletionStream(responder, script, chunks, include_usage=gen.include_usage)
            responder.start_stream(200, wire.SSE_CONTENT_TYPE)
        else:
            seq.sink = CompletionWhole(responder, script, request_id, created, self.model,
                                       gen.prompt_tokens, self._kv_params(part, gen, request_id))
        self._submit(seq, responder)
