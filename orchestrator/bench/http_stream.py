"""The hot path: a small HTTP/1.1 client for streamed (SSE) completions on asyncio.

Why not httpx or aiohttp: a benchmark client must not be the bottleneck nor blur the
timings it reports (measured figures in docs/bench.md). This client is an
`asyncio.Protocol`: `data_received` is the earliest point where Python sees the bytes, and
the arrival stamp is taken there before any parsing (on a `stamping.stamping_loop()`, the
moment `select()` returned). It then decodes chunked transfer encoding, splits SSE events
and classifies each event with one regular-expression pass; JSON is parsed only after the
response ends, and only for the usage chunk and error events.

One `StreamConnection` carries one request at a time (keep-alive, no pipelining).

What a hostile server can make it hold is bounded per request: a header block, a chunk-size
line or trailers of at most LINE_CAP, an SSE event of at most EVENT_CAP (one that never
ends), at most MAX_CHUNKS text chunks (a stream that never ends) and, with `keep_text`, at
most TEXT_CAP bytes of text. Past one, the request fails with the bound in its reason, the
connection is dropped and its text is not kept (bench/client.py bounds its time).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from orchestrator.bench.request_record import RequestRecord
from orchestrator.bench.sse_bytes import extended_chunk_size, lf_line_ends
from orchestrator.bench.sse_events import Shape, classify, read_shaped, whole_chunks
from orchestrator.bench.stamping import ArrivalClock, clock_of
from orchestrator.errors import BenchError
from orchestrator.masking import mask_bytes

_perf_ns = time.perf_counter_ns
_BODY_CAP = 64 * 1024  # bytes of a non-SSE body kept for the error message
LINE_CAP = 64 * 1024  # a header block, a chunk-size line, trailers (as httpx/h11 take)
EVENT_CAP = 1024 * 1024  # one SSE event: a chunk of an answer is a few hundred bytes
TEXT_CAP = 8 * 1024 * 1024  # text kept for a tokenizer: about two million tokens
MAX_CHUNKS = 500_000  # text chunks of one answer: more tokens than an answer is asked for
_WHOLE_CHUNKS_FROM = 4096  # bytes left in a read worth one try of `whole_chunks`

# body framing
_CHUNKED, _LENGTH, _UNTIL_CLOSE = 1, 2, 3
# parser states
_IDLE, _HEADERS, _BODY, _TRAILERS, _DONE = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: scheme, host, port and the path prefix of the server root."""

    scheme: str
    host: str
    port: int
    prefix: str  # "" or "/something", without a trailing slash

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def root(self) -> str:
        return f"{self.scheme}://{self.host_header}{self.prefix}"


def parse_target(url: str) -> Endpoint:
    """'http://127.0.0.1:8000' (optionally ending in /v1) -> Endpoint; BenchError if not a URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchError(
            f"{url!r} is not a server URL",
            hint="give the server root, e.g. http://127.0.0.1:8000",
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise BenchError(f"{url!r}: {error}") from None
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[:-3]
    return Endpoint(parts.scheme, parts.hostname, port, prefix)


class StreamConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that parses streamed responses as they arrive."""

    def __init__(self, on_header: Callable[[bytes, bytes], None] | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._on_header = on_header
        self._record: RequestRecord | None = None
        self._future: asyncio.Future[None] | None = None
        self._completions = False
        self._keep_text = False
        self._state = _IDLE
        self._pending = b""
        self._framing = _CHUNKED
        self._left = 0  # body bytes left in the current chunk (or of Content-Length)
        self._crlf = 0  # bytes of the CRLF after a chunk still to skip
        self._sse = False
        self._sse_tail = b""
        self._kept = 0  # bytes of text kept (keep_text)
        self._shape: Shape | None = None  # the simple events' shape (sse_events.py)
        self._clock: ArrivalClock | None = None

    # -- asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._clock = clock_of(asyncio.get_running_loop())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._record is None or self._state == _DONE:
            return
        if self._state == _BODY and self._framing == _UNTIL_CLOSE:
            self._complete(_perf_ns())
            return
        reason = str(exc) if exc else "the server closed the connection mid-response"
        self._record.fail("connection_closed", reason)
        self._complete(_perf_ns())

    def data_received(self, data: bytes) -> None:
        # the arrival stamp, before any parsing (see the module docstring)
        clock = self._clock
        now = clock.ns if clock is not None and clock.ns else _perf_ns()
        if not data:
            return
        if self._record is None:
            self.reusable = False  # bytes nobody asked for
            return
        if self._pending:
            data = self._pending + data
            self._pending = b""
        if self._state == _HEADERS:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self._pending = data
                if len(data) > LINE_CAP:
                    self._give_up(f"a header block longer than {LINE_CAP >> 10} KiB", now)
                return
            self._headers(data[:end], now)
            data = data[end + 4 :]
            if self._state == _DONE:
                return
        if self._state == _BODY:
            if self._framing == _CHUNKED:
                self._chunked(data, now)
            else:
                self._unchunked(data, now)
        elif self._state == _TRAILERS:
            self._trailers(data, now)
        if len(self._pending) > LINE_CAP:  # a chunk-size line or trailers without end
            self._give_up(f"a chunk-size line or trailers longer than {LINE_CAP >> 10} KiB", now)

    # -- requests ---------------------------------------------------------------------
    def begin(
        self, record: RequestRecord, *, completions: bool, keep_text: bool = False
    ) -> asyncio.Future[None]:
        """Arm the parser for the next response; the caller then writes the request.
        `keep_text`: keep each chunk's text (escaped) for a tokenizer to count later."""
        loop = asyncio.get_running_loop()
        self._record = record
        self._future = loop.create_future()
        self._completions = completions
        self._keep_text = keep_text
        self._state = _HEADERS
        self._pending = b""
        self._sse_tail = b""
        self._kept = 0
        self._shape = None
        return self._future

    def abort(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    def _give_up(self, why: str, now: int) -> None:
        """A bound passed: the request fails saying so (read no further), its text is
        dropped, the connection with it."""
        record = self._record
        if record is not None:
            record.fail("bad_response", f"{why} (read no further)")
            record.text_raw = record.reasoning_raw = None
        self._pending = self._sse_tail = b""
        self._complete(now)
        self.abort()

    # -- parsing ----------------------------------------------------------------------
    def _headers(self, block: bytes, now: int) -> None:
        record = self._record
        assert record is not None
        record.headers_ns = now
        lines = block.split(b"\r\n")
        status_line = lines[0].split(None, 2)
        try:
            record.status = int(status_line[1])
            record.reason = status_line[2].strip().decode("latin-1") if len(status_line) > 2 else ""
        except (IndexError, ValueError):
            record.fail("bad_response", f"not an HTTP status line: {mask_bytes(lines[0], 80)!r}")
            self.reusable = False
            self._complete(now)
            return
        framing, length, event_stream = _UNTIL_CLOSE, 0, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip()
            if name == b"transfer-encoding" and b"chunked" in value.lower():
                framing = _CHUNKED
            elif name == b"content-length" and framing != _CHUNKED:
                if not value.isdigit():  # int() would take "-5" or " 1_0"; a loop must not die
                    record.fail("bad_response", f"Content-Length {mask_bytes(value, 40)!r} is not a length")
                    self.reusable = False
                    self._complete(now)
                    return
                framing, length = _LENGTH, int(value)
            elif name == b"content-type":
                event_stream = value.lower().startswith(b"text/event-stream")
            elif name == b"connection" and value.lower() == b"close":
                self.reusable = False
            if self._on_header is not None:
                self._on_header(name, value)
        if status_line[0] == b"HTTP/1.0":
            self.reusable = False
        self._framing = framing
        self._left = length if framing == _LENGTH else 0
        self._crlf = 0
        self._sse = event_stream and record.status == 200
        record.event_stream = event_stream
        if framing == _UNTIL_CLOSE:
            self.reusable = False
        self._state = _BODY
        if framing == _LENGTH and length == 0:
            self._complete(now)

    def _unchunked(self, data: bytes, now: int) -> None:
        """A body framed by Content-Length, or one that ends when the connection closes."""
        if self._framing == _LENGTH:
            extra = len(data) - self._left
            if extra > 0:
                data = data[: self._left]
                self.reusable = False
            self._left -= len(data)
        if self._sse:
            self._events(data, now)
        else:
            self._keep_body(data)
        if self._framing == _LENGTH and self._left <= 0:
            self._complete(now)

    def _chunked(self, data: bytes, now: int) -> None:
        """Decode chunked transfer encoding: the chunks' bytes go on in one piece."""
        pieces: list[bytes] = []
        pos, n = 0, len(data)
        left, crlf = self._left, self._crlf
        finished = tried = False
        while True:
            if left:
                take = n - pos
                if take <= 0:
                    break
                if take > left:
                    take = left
                pieces.append(data[pos : pos + take])
                pos += take
                left -= take
                if left:
                    break
                crlf = 2
            if crlf:
                if n - pos >= crlf:
                    pos += crlf
                    crlf = 0
                else:
                    crlf -= n - pos
                    pos = n
                    break
            if n - pos >= _WHOLE_CHUNKS_FROM and not tried:
                tried = True  # once: what it leaves is a chunk's start or the end
                if (whole := whole_chunks(data, pos)) is not None:
                    pieces.append(whole[0])
                    pos = whole[1]
                    continue
            size, pos = self._size_line(data, pos)
            if size is None:
                break
            if size <= 0:  # the last chunk, or a bad size (recorded)
                finished = True
                break
            left = size
        self._left, self._crlf = left, crlf
        if pieces and self._sse:
            self._events(b"".join(pieces), now)  # a join of one piece is that piece
        elif pieces:
            self._keep_body(b"".join(pieces))
        if finished:
            self._after_last_chunk(data[pos:], now)

    def _size_line(self, data: bytes, pos: int) -> tuple[int | None, int]:
        """The chunk size on the line at `pos` and where its bytes begin; None: the line is
        not all here yet (kept for the next read); below 0: a bad size, recorded."""
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            self._pending = data[pos:]
            return None, pos
        size_text = data[pos:eol]
        try:
            size = int(size_text, 16)
        except ValueError:  # chunk extensions (`;name=value`) or garbage
            size = extended_chunk_size(size_text)
        if size < 0:
            self._record_fail("bad_response", f"bad chunk size {mask_bytes(size_text, 40)!r}")
            self.reusable = False
        return size, eol + 2

    def _after_last_chunk(self, rest: bytes, now: int) -> None:
        if self._record is not None and self._record.error_kind == "bad_response":
            self._complete(now)
        else:
            self._state = _TRAILERS
            self._trailers(rest, now)

    def _trailers(self, data: bytes, now: int) -> None:
        # After the last chunk: optional trailer fields, then an empty line.
        if data.startswith(b"\r\n"):
            rest = data[2:]
        else:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self._pending = data
                return
            rest = data[end + 4 :]
        if rest:
            self.reusable = False
        self._complete(now)

    def _record_fail(self, kind: str, message: str) -> None:
        if self._record is not None:
            self._record.fail(kind, message)

    def _keep_body(self, body: bytes) -> None:
        """A body that is not an event stream: its start is kept for the error message."""
        record = self._record
        assert record is not None
        kept = record.body_raw or b""
        if len(kept) < _BODY_CAP:
            record.body_raw = kept + body[: _BODY_CAP - len(kept)]

    def _events(self, body: bytes, now: int) -> None:
        """Split SSE events; an event of the learned shape is read here, any other by the
        key scan (`sse_events.classify`), with the same result."""
        record = self._record
        assert record is not None
        body = self._sse_tail + body if self._sse_tail else body
        if b"\r" in body:
            body = lf_line_ends(body)
        events = body.split(b"\n\n")
        self._sse_tail = events.pop()
        completions, keep_text, shape = self._completions, self._keep_text, self._shape
        texts = (len(record.text_raw or ()), len(record.reasoning_raw or ())) if keep_text else None
        at, count = 0, len(events)
        # a line end that is not in a separator: one count instead of a find per event
        lone_lf = body.count(b"\n") != 2 * count + self._sse_tail.count(b"\n")
        while at < count:
            if shape is not None:  # a run of events of the shape, at C speed or near
                at = read_shaped(record, shape, events, at, now, keep_text, lone_lf)
                if at == count:
                    break
            found = classify(record, events[at], now, completions, keep_text)
            if found is not None:
                shape = self._shape = found
            at += 1
        self._bound(record, texts, now)

    def _bound(self, record: RequestRecord, texts: tuple[int, int] | None, now: int) -> None:
        """Gives up on an answer past a bound (see the module docstring); `texts`: how many
        text pieces of each kind were kept before this read."""
        if texts is not None:
            self._kept += sum(map(len, (record.text_raw or ())[texts[0]:]))
            self._kept += sum(map(len, (record.reasoning_raw or ())[texts[1]:]))
        if len(self._sse_tail) > EVENT_CAP:
            self._give_up(f"an SSE event longer than {EVENT_CAP >> 20} MiB", now)
        elif len(record.token_ns) > MAX_CHUNKS:
            self._give_up(f"more than {MAX_CHUNKS:,} text chunks in one answer", now)
        elif self._kept > TEXT_CAP:
            self._give_up(f"more than {TEXT_CAP >> 20} MiB of text in one answer", now)

    def _complete(self, now: int) -> None:
        record, future = self._record, self._future
        self._state = _DONE
        self._record = None
        self._future = None
        if record is not None:
            record.end_ns = now
        if future is not None and not future.done():
            future.set_result(None)


async def open_connection(
    target: Endpoint,
    *,
    ssl_context: ssl.SSLContext | None = None,
    on_header: Callable[[bytes, bytes], None] | None = None,
) -> StreamConnection:
    """A new connection to `target` (OSError and TimeoutError propagate to the caller)."""
    loop = asyncio.get_running_loop()
    context = ssl_context
    if target.scheme == "https" and context is None:
        context = ssl.create_default_context()
    _, protocol = await loop.create_connection(
        lambda: StreamConnection(on_header),
        target.host,
        target.port,
        ssl=context,
        server_hostname=target.host if context is not None else None,
    )
    return protocol
