"""A tiny OpenAI-style chat server on 127.0.0.1 for the smoke-check tests: real HTTP, real SSE.

Each prompt maps to a scripted `Reply`; chunks follow vLLM 0.17.1's stream format (facts §3).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "kimi-k2.5"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1760000000,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        },
        separators=(",", ":"),
    )


def vllm_stream(
    content: str,
    reasoning: str = "",
    *,
    field_name: str = "reasoning",
    finish: str = "stop",
    completion_tokens: int | None = None,
    pieces: int = 4,
) -> list[str]:
    """The `data:` payloads of a vLLM stream answering with `reasoning` then `content`."""
    events = [_chunk({"role": "assistant", "content": ""})]
    for text, key in ((reasoning, field_name), (content, "content")):
        step = max(1, -(-len(text) // pieces))
        events += [_chunk({key: text[i : i + step]}) for i in range(0, len(text), step)]
    events.append(_chunk({}, finish))
    tokens = completion_tokens if completion_tokens is not None else len((reasoning + content).split())
    usage = {"prompt_tokens": 12, "total_tokens": 12 + tokens, "completion_tokens": tokens}
    final = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1760000000,
             "model": MODEL, "choices": [], "usage": usage}  # fmt: skip
    events.append(json.dumps(final, separators=(",", ":")))
    events.append("[DONE]")
    return events


@dataclass
class Reply:
    events: list[str] = field(default_factory=list)
    status: int = 200
    body: str = ""  # for non-200 replies
    cut_after: int | None = None  # close the connection after this many events (a crash)
    delay_s: float = 0.0  # before the first event


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append({"path": self.path, "body": body,
                                     "authorization": self.headers.get("Authorization")})
        prompt = body["messages"][-1]["content"]
        reply = self.server.replies.get(prompt, Reply(status=404, body='{"error":{"message":'
                                         '"no scripted reply","type":"NotFoundError","code":404}}'))
        if reply.status != 200:
            data = reply.body.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        time.sleep(reply.delay_s)
        try:
            for index, event in enumerate(reply.events):
                if reply.cut_after is not None and index >= reply.cut_after:
                    return  # HTTP/1.0: closing now ends the body mid-stream
                self.wfile.write(f"data: {event}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (a timeout test)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    replies: dict[str, Reply]
    requests: list[dict[str, Any]]


@contextmanager
def chat_server(replies: dict[str, Reply]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve `replies` (prompt -> reply) on a free loopback port; yields (base URL, requests)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.replies = replies
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
