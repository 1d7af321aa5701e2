"""A small HTTP/1.1 server on asyncio protocols, shaped like uvicorn on the wire.

Why not a framework: the simulator must stream at least 50,000 SSE chunks per second on one
core so that it is never what a benchmark measures; a plain protocol reaches several times
that (see benchmarks/sim_capacity.py). It does what vLLM's clients need and no more:
keep-alive, pipelined requests handled in order, Content-Length request bodies,
`Expect: 100-continue`, full responses with Content-Length and streamed responses with
chunked transfer encoding (HTTP/1.0 clients get the stream until the connection closes).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: str
    version: str  # "HTTP/1.1" or "HTTP/1.0"
    headers: dict[str, str]  # lower-case names
    body: bytes


Handler = Callable[[Request, "Responder"], None]


class _DateCache:
    """The `date` header, recomputed at most once per second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def get(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._value = formatdate(now, usegmt=True).encode("ascii")
        return self._value


_DATE = _DateCache()


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b"Unknown"


class Responder:
    """Answers one request: either `send()` once, or `start_stream()`, `write()`*, `end()`."""

    __slots__ = (
        "_chunked",
        "_conn",
        "_extra",
        "_head_only",
        "_keep_alive",
        "finished",
        "on_close",
        "started",
    )

    def __init__(
        self, conn: HttpConnection, keep_alive: bool, head_only: bool, extra: bytes
    ) -> None:
        self._conn = conn
        self._keep_alive = keep_alive
        self._head_only = head_only
        self._extra = extra  # headers every response carries
        self._chunked = True
        self.started = False
        self.finished = False
        self.on_close: Callable[[], None] | None = None

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def _head(self, status: int, headers: Iterable[tuple[str, str]]) -> bytearray:
        out = bytearray(b"HTTP/1.1 %d %s\r\n" % (status, _reason(status)))
        out += b"date: " + _DATE.get() + b"\r\nserver: uvicorn\r\n"
        for name, value in headers:
            out += f"{name}: {value}\r\n".encode("latin-1")
        out += self._extra
        if not self._keep_alive:
            out += b"connection: close\r\n"
        out += b"\r\n"
        return out

    def send(
        self,
        status: int,
        body: bytes = b"",
        content_type: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        if self.finished or self.started:
            return
        fields = [("content-length", str(len(body)))]
        if content_type is not None:
            fields.append(("content-type", content_type))
        fields.extend(headers)
        out = self._head(status, fields)
        if not self._head_only:
            out += body
        self.started = True
        self._conn.write(bytes(out))
        self._finish()

    def start_stream(self, status: int, content_type: str) -> None:
        if self.started:
            return
        self.started = True
        self._chunked = self._conn.http11
        if not self._chunked:
            self._keep_alive = False
        fields = [("content-type", content_type)]
        if self._chunked:
            fields.append(("transfer-encoding", "chunked"))
        self._conn.write(bytes(self._head(status, fields)))
        if self._head_only:
            self._finish()

    def write(self, data: bytes) -> None:
        if self.finished or not data:
            return
        if self._chunked:
            self._conn.write(b"%x\r\n%b\r\n" % (len(data), data))
        else:
            self._conn.write(data)

    def end(self, data: bytes = b"") -> None:
        """Write the last data (if any) and finish the streamed response."""
        if self.finished:
            return
        if self._chunked:
            if data:
                self._conn.write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(data), data))
            else:
                self._conn.write(b"0\r\n\r\n")
        elif data:
            self._conn.write(data)
        self._finish()

    def _finish(self) -> None:
        self.finished = True
        self._conn.response_done(self._keep_alive)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpConnection(asyncio.Protocol):
    def __init__(self, handler: Handler, extra_headers: bytes, connections: set[HttpConnection]):
        self._handler = handler
        self._extra = extra_headers
        self._connections = connections
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._current: Responder | None = None
        self._continue_sent = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self.closed = False
        self.http11 = True

    # asyncio callbacks --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._connections.add(self)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._current is None:
            self._process()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._connections.discard(self)
        current, self._current = self._current, None
        if current is not None and not current.finished and current.on_close is not None:
            current.on_close()

    # plumbing -----------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue data; it goes out once per event-loop turn, so the tokens of several engine
        steps run back to back cost one send() per connection instead of one each."""
        if self.closed or self._transport is None:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and not self.closed and self._transport is not None:
            data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
            self._out.clear()
            self._transport.write(data)

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self._flush()
            self._transport.close()

    def response_done(self, keep_alive: bool) -> None:
        self._current = None
        if not keep_alive:
            self.close()
        elif self._buffer and self._transport is not None:
            # Not re-entrant: pipelined requests are picked up on the next loop turn.
            asyncio.get_running_loop().call_soon(self._resume)

    def _resume(self) -> None:
        if self._current is None and not self.closed:
            self._process()

    def _process(self) -> None:
        while self._current is None and not self.closed:
            try:
                request = self._parse()
            except HttpError as error:
                self._reject(error.status, str(error))
                return
            if request is None:
                return
            responder = Responder(
                self, self._keep_alive(request), request.method == "HEAD", self._extra
            )
            self._current = responder
            self._handler(request, responder)
            if not responder.finished:
                return  # answered later; response_done() resumes the loop
            # a finished responder already cleared _current (or closed the connection)

    def _keep_alive(self, request: Request) -> bool:
        connection = request.headers.get("connection", "").lower()
        if request.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection

    def _reject(self, status: int, message: str) -> None:
        body = json.dumps({"detail": message}, separators=(",", ":")).encode()
        head = b"HTTP/1.1 %d %s\r\ndate: %s\r\nserver: uvicorn\r\n" % (
            status,
            _reason(status),
            _DATE.get(),
        )
        head += b"content-length: %d\r\ncontent-type: application/json\r\n" % len(body)
        head += self._extra + b"connection: close\r\n\r\n"
        self.write(head + body)
        self._buffer.clear()
        self.close()

    def _parse(self) -> Request | None:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise HttpError(431, "Request header fields too large")
            return None
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "Invalid HTTP request line")
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HttpError(400, "Invalid HTTP header line")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise HttpError(411, "Chunked request bodies are not supported; send Content-Length")
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise HttpError(400, "Invalid Content-Length header") from None
        if length < 0:
            raise HttpError(400, "Invalid Content-Length header")
        if length > MAX_BODY_BYTES:
            raise HttpError(413, "Request body too large")
        start = end + 4
        if len(self._buffer) - start < length:
            expect = headers.get("expect", "").lower()
            if expect == "100-continue" and not self._continue_sent:
                self._continue_sent = True
                self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return None
        body = bytes(self._buffer[start : start + length])
        del self._buffer[: start + length]
        self._continue_sent = False
        self.http11 = version == "HTTP/1.1"
        path, _, query = target.partition("?")
        return Request(method, path, query, version, headers, body)


class HttpServer:
    """Serves `handler` on a socket that is already bound (listening starts in `serve`)."""

    def __init__(self, handler: Handler, extra_headers: Iterable[tuple[str, str]] = ()) -> None:
        self._handler = handler
        self._extra = b"".join(f"{n}: {v}\r\n".encode("latin-1") for n, v in extra_headers)
        self.connections: set[HttpConnection] = set()
        self._server: asyncio.base_events.Server | None = None

    async def serve(self, sock: socket.socket, backlog: int = 2048) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: HttpConnection(self._handler, self._extra, self.connections),
            sock=sock,
            backlog=backlog,
        )

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
