"""A tiny OpenAI-compatible streaming server with exactly known timing, for measuring clients.

Two behaviours:
- zero delay (`--ttft-ms 0 --itl-ms 0`): the whole SSE body (one HTTP chunk per event, as
  uvicorn frames it) is rendered once and written at once, so the server costs next to
  nothing and the client's ingest rate is what gets measured;
- known delays: the first token after `--ttft-ms`, then one token every `--itl-ms`, the
  first `--reasoning` tokens as `delta.reasoning` (or `reasoning_content`). With
  `--record-timings` the server keeps, per `x-request-id`, when the request arrived and
  when each token was written (perf_counter_ns, the same monotonic clock as the client's on
  Linux), served at `GET /timings`, so a client's TTFT and ITL error can be computed exactly.

vLLM's chunk habits, on request: `--empty-every K` sends every K-th token as a chunk with
empty text (a partial UTF-8 character its detokenizer holds back), `--merge-every K` makes
every K-th chunk carry two tokens (steps merged while the API server was behind), and a
request asking `stream_options.continuous_usage_stats` gets usage with the output tokens so
far in every chunk (`--no-continuous-usage`: ignored, as servers other than vLLM do).

Run: `python benchmarks/stream_server.py --port 0 [...]`; it prints `PORT <n>` when ready.
`running_stream_server(...)` starts it as a subprocess for tests and benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_perf_ns = time.perf_counter_ns


@dataclass
class Options:
    tokens: int | None = None  # None: use the request's max_tokens
    reasoning: int = 0
    reasoning_field: str = "reasoning"
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    usage: bool = True
    record_timings: bool = False
    model: str = "stream-test"
    error_after: int | None = None  # send an error event after this many tokens
    exit_after_requests: int | None = None  # the process dies (os._exit) after N requests
    empty_every: int = 0  # every K-th token streams with empty text
    merge_every: int = 0  # every K-th chunk carries two tokens
    continuous_usage: bool = True  # honour stream_options.continuous_usage_stats


def chunk_sizes(n: int, merge_every: int) -> list[int]:
    """Tokens per chunk for n tokens: 2 in every merge_every-th chunk, else 1."""
    sizes: list[int] = []
    while sum(sizes) < n:
        two = merge_every and (len(sizes) + 1) % merge_every == 0 and n - sum(sizes) >= 2
        sizes.append(2 if two else 1)
    return sizes


def _frame(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def _event(payload: str) -> bytes:
    return _frame(b"data: " + payload.encode() + b"\n\n")


class Renderer:
    def __init__(self, options: Options) -> None:
        self.o = options
        self._cache: dict[tuple[str, int], tuple[list[bytes], bytes]] = {}

    def events(self, endpoint: str, n: int, prompt_tokens: int,
               continuous: bool = False) -> tuple[list[bytes], bytes]:
        """One framed event per chunk (the first also carries the role chunk), and the
        tail: the usage chunk, [DONE] and the last chunk of the chunked body."""
        key = (endpoint, n, continuous)
        if key in self._cache:
            return self._cache[key]
        o = self.o
        head = (
            f'{{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1,"model":"{o.model}","choices":['
        )

        def usage(count: int) -> str:
            return (f',"usage":{{"prompt_tokens":{prompt_tokens},"total_tokens":'
                    f'{prompt_tokens + count},"completion_tokens":{count}}}' if continuous else "")

        tokens: list[bytes] = []
        first = 0
        for size in chunk_sizes(n, o.merge_every):
            last = first + size - 1
            finish = '"length"' if last == n - 1 else "null"
            word = "".join(self.word(i) for i in range(first, last + 1))
            if endpoint == "chat":
                field = o.reasoning_field if first < o.reasoning else "content"
                body = (
                    head + f'{{"index":0,"delta":{{"{field}":"{word}"}},"logprobs":null,'
                    f'"finish_reason":{finish},"token_ids":null}}]{usage(last + 1)}}}'
                )
            else:
                body = (
                    f'{{"id":"cmpl-0","object":"text_completion","created":1,"model":"{o.model}",'
                    f'"choices":[{{"index":0,"text":"{word}","logprobs":null,"finish_reason":{finish},'
                    f'"stop_reason":null}}]{usage(last + 1)}}}'
                )
            tokens.append(_event(body))
            first = last + 1
        if endpoint == "chat" and tokens:
            role = head + (
                '{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                f'"finish_reason":null}}]{usage(0)},"prompt_token_ids":null}}'
            )
            tokens[0] = _event(role) + tokens[0]
        tail = b""
        if o.usage:
            tail += _event(
                head[: head.index('"choices"')]
                + f'"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},'
                f'"total_tokens":{prompt_tokens + n},"completion_tokens":{n}}}}}'
            )
        tail += _event("[DONE]") + b"0\r\n\r\n"
        self._cache[key] = (tokens, tail)
        return tokens, tail

    def word(self, i: int) -> str:
        empty = self.o.empty_every and (i + 1) % self.o.empty_every == 0
        return "" if empty else f" w{i}"


class Handler(asyncio.Protocol):
    renderer: Renderer
    timings: dict[str, dict[str, Any]]
    served = 0

    def __init__(self, options: Options) -> None:
        self.o = options
        self.buf = b""
        self.t: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport

    def data_received(self, data: bytes) -> None:
        recv = _perf_ns()
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path = head[0].split(" ")[:2]
            self.route(method, path, headers, body, recv)

    def respond(self, status: str, body: bytes, ctype: str = "application/json") -> None:
        assert self.t is not None
        self.t.write(
            b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status.encode(), ctype.encode(), len(body), body)
        )

    def route(self, method: str, path: str, headers: dict[str, str], body: bytes, recv: int) -> None:
        if method == "GET" and path == "/v1/models":
            self.respond("200 OK", json.dumps({"object": "list", "data": [{"id": self.o.model, "object": "model"}]}).encode())
        elif method == "GET" and path == "/timings":
            self.respond("200 OK", json.dumps(Handler.timings).encode())
        elif method == "GET" and path == "/health":
            self.respond("200 OK", b"")
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            request = json.loads(body or b"{}")
            endpoint = "chat" if path.endswith("chat/completions") else "completions"
            n = self.o.tokens or int(request.get("max_completion_tokens") or request.get("max_tokens") or 16)
            asked = (request.get("stream_options") or {}).get("continuous_usage_stats", False)
            self.stream(endpoint, n, headers.get("x-request-id", ""), recv,
                        bool(asked) and self.o.continuous_usage and self.o.usage)
        else:
            self.respond("404 Not Found", b'{"error":{"message":"not found","type":"NotFoundError","param":null,"code":404}}')

    def stream(self, endpoint: str, n: int, request_id: str, recv: int,
               continuous: bool = False) -> None:
        assert self.t is not None
        Handler.served += 1
        o = self.o
        tokens, tail = self.renderer.events(endpoint, n, 12, continuous)
        sizes = chunk_sizes(n, o.merge_every)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
        if o.error_after is not None:
            error = _event(json.dumps({"error": {"message": "injected failure", "type": "InternalServerError", "param": None, "code": 500}}))
            tokens = tokens[: o.error_after]
            tail = error + _event("[DONE]") + b"0\r\n\r\n"
        if o.ttft_ms == 0 and o.itl_ms == 0:
            self.t.write(head + b"".join(tokens) + tail)
            self.after_request()
            return
        self.t.write(head)
        writes: list[int] = []
        if o.record_timings:
            Handler.timings[request_id] = {"recv_ns": recv, "write_ns": writes, "tokens": sizes}
        loop = asyncio.get_running_loop()
        origin = loop.time()
        transport = self.t
        last = len(tokens) - 1

        def send(i: int) -> None:
            if transport.is_closing():
                return
            writes.append(_perf_ns())
            transport.write(tokens[i] + tail if i == last else tokens[i])
            if i == last:
                self.after_request()

        if not tokens:
            transport.write(tail)
            self.after_request()
        due = -1  # a chunk goes out when its last token is due
        for i, size in enumerate(sizes[: len(tokens)]):
            due += size
            loop.call_at(origin + (o.ttft_ms + due * o.itl_ms) / 1000.0, send, i)

    def after_request(self) -> None:
        if self.o.exit_after_requests and Handler.served >= self.o.exit_after_requests:
            os._exit(3)


async def serve(options: Options, port: int) -> None:
    Handler.renderer = Renderer(options)
    Handler.timings = {}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Handler(options), "127.0.0.1", port, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--reasoning", type=int, default=0)
    parser.add_argument("--reasoning-field", default="reasoning")
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--no-usage", action="store_true")
    parser.add_argument("--record-timings", action="store_true")
    parser.add_argument("--error-after", type=int)
    parser.add_argument("--exit-after-requests", type=int)
    parser.add_argument("--empty-every", type=int, default=0)
    parser.add_argument("--merge-every", type=int, default=0)
    parser.add_argument("--no-continuous-usage", action="store_true")
    args = parser.parse_args(argv)
    options = Options(
        tokens=args.tokens,
        reasoning=args.reasoning,
        reasoning_field=args.reasoning_field,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        usage=not args.no_usage,
        record_timings=args.record_timings,
        error_after=args.error_after,
        exit_after_requests=args.exit_after_requests,
        empty_every=args.empty_every,
        merge_every=args.merge_every,
        continuous_usage=not args.no_continuous_usage,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(options, args.port))


@contextlib.contextmanager
def running_stream_server(*args: str, cpu: int | None = None) -> Iterator[str]:
    """Start the server in a subprocess (optionally pinned to one CPU); yield its base URL."""
    command = [sys.executable, os.path.abspath(__file__), "--port", "0", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(process.pid, {cpu})
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"stream server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
