"""Send one streamed request and fill its record: connection reuse, timeouts, error kinds.

`StreamClient` keeps idle keep-alive connections (LIFO, so a closed-loop worker tends to
get its own connection back) until the server shows that it closes them after each answer
(llama.cpp's server does, without a `Connection: close`): from then on every request gets
a new connection instead of a dead one and a resend. It never raises for a failed
request: the failure is written into the record (`error_kind`), because connection errors
are counted and must never end a sweep. Only cancellation (Ctrl-C) propagates.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping

from orchestrator.bench.http_stream import Endpoint, StreamConnection, open_connection
from orchestrator.bench.request_record import RequestRecord

_perf_ns = time.perf_counter_ns
# Kept connections found dead on reuse, with no good reuse between them, before the client
# stops keeping them: one can be a server's idle timeout firing at that very moment; two in
# a row is a habit. (At concurrency C, up to C requests in flight can meet one at once.)
DEAD_REUSES_BEFORE_NEW_CONNECTIONS = 2


class StreamClient:
    """Streams POST requests to one endpoint of one server."""

    def __init__(
        self,
        target: Endpoint,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        completions: bool = False,
        timeout: float = 600.0,
        ssl_context: ssl.SSLContext | None = None,
        keep_text: bool = False,
    ) -> None:
        self.target = target
        self.completions = completions
        self.keep_text = keep_text  # a tokenizer counts the text after the phase
        self.timeout = timeout
        self._ssl = ssl_context
        self._idle: list[StreamConnection] = []
        self.simulator_header: str | None = None
        self.refused_in_a_row = 0
        self.keep_alive = True  # False once the server closed kept connections (see above)
        self.dead_reuses = 0
        lines = [
            f"POST {target.prefix}{path} HTTP/1.1",
            f"Host: {target.host_header}",
            "User-Agent: orch-bench",
            "Accept: text/event-stream",
            "Accept-Encoding: identity",
            "Content-Type: application/json",
        ]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self._head = ("\r\n".join(lines) + "\r\nx-request-id: ").encode("latin-1")
        # once connections are not kept, the server is told so
        self._head_close = ("\r\n".join([*lines, "Connection: close"])
                            + "\r\nx-request-id: ").encode("latin-1")

    def _on_header(self, name: bytes, value: bytes) -> None:
        if name == b"x-orch-simulator":
            self.simulator_header = value.decode("latin-1")

    async def send(self, body: bytes, record: RequestRecord) -> None:
        """Send `body`, stream the answer into `record`. Retries once when a reused
        keep-alive connection turns out to be closed before any byte came back (the record
        says so: the level counts such retries)."""
        record.start_ns = _perf_ns()
        for attempt in (0, 1):
            reused = await self._attempt(body, record)
            if not (
                reused
                and attempt == 0
                and record.error_kind == "connection_closed"
                and record.headers_ns == 0
            ):
                if reused and record.headers_ns:
                    self.dead_reuses = 0  # a kept connection that answered
                break
            record.error_kind = record.error_message = None
            record.end_ns = 0
            record.retried = True  # counted per level: a server closing idle connections
            self.dead_reuses += 1
            if self.dead_reuses >= DEAD_REUSES_BEFORE_NEW_CONNECTIONS and self.keep_alive:
                self.keep_alive = False
                self.close()
            # The dead attempt is the client's loss, not the server's latency: its clock
            # restarts (llama-server drops every kept connection: most requests retry).
            record.start_ns = _perf_ns()
        record.finish()
        if record.error_kind == "connect_refused":
            self.refused_in_a_row += 1
        elif record.ok:
            self.refused_in_a_row = 0

    async def _attempt(self, body: bytes, record: RequestRecord) -> bool:
        connection: StreamConnection | None = None
        while self._idle and connection is None:
            candidate = self._idle.pop()
            if not candidate.closed:
                connection = candidate
        reused = connection is not None
        request = b"".join(
            (
                self._head if self.keep_alive else self._head_close,
                record.request_id.encode("ascii"),
                b"\r\nContent-Length: ",
                str(len(body)).encode("ascii"),
                b"\r\n\r\n",
                body,
            )
        )
        try:
            async with asyncio.timeout(self.timeout):
                if connection is None:
                    connection = await self._connect(record)
                    if connection is None:
                        return False
                done = connection.begin(record, completions=self.completions,
                                        keep_text=self.keep_text)
                assert connection.transport is not None
                connection.transport.write(request)
                await done
        except TimeoutError:
            record.fail("timeout", f"no complete answer within {self.timeout:g} s")
            record.end_ns = _perf_ns()
            if connection is not None:
                connection.abort()
            return reused
        except asyncio.CancelledError:
            record.fail("cancelled", "the level was stopped while the request was running")
            record.end_ns = _perf_ns()
            if connection is not None:
                connection.abort()
            raise
        if connection.reusable and not connection.closed and self.keep_alive:
            self._idle.append(connection)
        elif not connection.closed:
            if connection.reusable and connection.transport is not None:
                connection.transport.close()  # an answered request: a polite close
            else:
                connection.abort()
        return reused

    async def _connect(self, record: RequestRecord) -> StreamConnection | None:
        try:
            return await open_connection(
                self.target, ssl_context=self._ssl, on_header=self._on_header
            )
        except ConnectionRefusedError as error:
            record.fail("connect_refused", f"{self.target.root}: {error.strerror or error}")
        except ssl.SSLError as error:
            record.fail("tls_error", f"{self.target.root}: {error}")
        except OSError as error:
            record.fail("connect_error", f"{self.target.root}: {error.strerror or error}")
        record.end_ns = _perf_ns()
        return None

    async def health(self, timeout: float = 2.0) -> int | None:
        """HTTP status of `GET /health` (vLLM: 503 once the engine is dead), or None when
        the server cannot be reached at all."""
        request = (
            f"GET {self.target.prefix}/health HTTP/1.1\r\nHost: {self.target.host_header}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("latin-1")
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    self.target.host,
                    self.target.port,
                    ssl=self._ssl or (True if self.target.scheme == "https" else None),
                )
                try:
                    writer.write(request)
                    status_line = await reader.readline()
                finally:
                    writer.close()
        except (OSError, TimeoutError):
            return None
        parts = status_line.split()
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None

    def close(self) -> None:
        for connection in self._idle:
            connection.abort()
        self._idle.clear()
