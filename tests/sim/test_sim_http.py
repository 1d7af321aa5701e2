"""The HTTP/1.1 layer over raw sockets: keep-alive, pipelining, framing, bad input."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from orchestrator.sim.testing import SimulatorProcess, running_simulator


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    with running_simulator(profile="instant") as process:
        yield process


def connect(sim: SimulatorProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    parts = []
    while data := sock.recv(65536):
        parts.append(data)
    return b"".join(parts)


def read_response(sock: socket.socket, buffer: bytearray) -> tuple[bytes, bytes]:
    """One Content-Length response from the socket (head, body); leftovers stay in buffer."""
    while b"\r\n\r\n" not in buffer:
        buffer += sock.recv(65536)
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        more = sock.recv(65536)
        rest += more
    buffer[:] = rest[length:]
    return head, rest[:length]


def chat_request(body: dict[str, object], extra: bytes = b"") -> bytes:
    payload = json.dumps(body).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n%b\r\n%b" % (len(payload), extra, payload))  # fmt: skip


def test_keep_alive_and_pipelining(sim: SimulatorProcess) -> None:
    with connect(sim) as sock:
        buffer = bytearray()
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 200 OK\r\ndate: ") and b"\r\nserver: uvicorn\r\n" in head
        assert body == b""
        request = chat_request({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        sock.sendall(request + b"GET /version HTTP/1.1\r\nhost: x\r\n\r\n")  # pipelined
        head, body = read_response(sock, buffer)
        assert json.loads(body)["usage"]["completion_tokens"] == 2
        head, body = read_response(sock, buffer)
        assert json.loads(body)["version"] == "0.17.1"


@pytest.mark.parametrize(
    ("request_bytes", "status", "body"),
    [
        (b"GET /nope HTTP/1.1\r\nhost: x\r\n\r\n", 404, b'{"detail":"Not Found"}'),
        (b"POST /health HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n", 405, b'{"detail":"Method Not Allowed"}'),
        (b"HELLO\r\n\r\n", 400, b'{"detail":"Invalid HTTP request line"}'),
        (b"POST /v1/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n", 411,
         b'{"detail":"Chunked request bodies are not supported; send Content-Length"}'),
        (b"GET /health HTTP/1.1\r\nbad header\r\n\r\n", 400, b'{"detail":"Invalid HTTP header line"}'),
    ],
)  # fmt: skip
def test_bad_requests_get_clear_statuses(sim: SimulatorProcess, request_bytes: bytes, status: int, body: bytes) -> None:
    with connect(sim) as sock:
        sock.sendall(request_bytes)
        head, got = read_response(sock, bytearray())
    assert head.startswith(b"HTTP/1.1 %d " % status)
    assert got == body


def test_head_sends_headers_only(sim: SimulatorProcess) -> None:
    with connect(sim) as sock:
        sock.sendall(b"HEAD /version HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        raw = read_until_closed(sock)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"content-length: " in head and body == b""


def test_http_10_streams_until_close(sim: SimulatorProcess) -> None:
    payload = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}).encode()
    with connect(sim) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.0\r\ncontent-length: %d\r\n\r\n%b" % (len(payload), payload))
        raw = read_until_closed(sock)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head and b"connection: close" in head
    assert body.startswith(b"data: {") and body.endswith(b"data: [DONE]\n\n")


def test_expect_continue(sim: SimulatorProcess) -> None:
    payload = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    with connect(sim) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nexpect: 100-continue\r\n"
                     b"content-length: %d\r\nconnection: close\r\n\r\n" % len(payload))  # fmt: skip
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(payload)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 200 OK")


def test_a_client_that_goes_away_aborts_its_request(sim: SimulatorProcess) -> None:
    def aborted() -> float:
        text = httpx.get(sim.url("/metrics")).text
        line = next(x for x in text.splitlines()
                    if x.startswith("vllm:request_success_total") and 'finished_reason="abort"' in x)  # fmt: skip
        return float(line.rsplit(" ", 1)[1])

    before = aborted()
    with connect(sim) as sock:
        sock.sendall(chat_request({"messages": [{"role": "user", "content": "hi"}], "stream": True,
                                   "max_tokens": 200_000 // 2, "ignore_eos": True}))  # fmt: skip
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
    deadline = time.monotonic() + 5
    while aborted() == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert aborted() == before + 1
    assert httpx.get(sim.url("/health")).status_code == 200
