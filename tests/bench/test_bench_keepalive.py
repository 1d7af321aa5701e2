"""A reused keep-alive connection that the server closed before answering: the request is
resent once on a new connection, and the record says so (the level counts such retries).
A server that does it every time (llama.cpp's) gets a new connection per request instead;
one whose idle timeout races a reuse now and then keeps its connections kept."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from orchestrator.bench.client import StreamClient
from orchestrator.bench.http_stream import parse_target
from orchestrator.bench.request_record import RequestRecord

DROP_AFTER_S = 0.3
ANSWER = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
          b"data: [DONE]\n\n")
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _server(connections: list[int], answers: Callable[[int], int | None],
            delay: float = 0.0) -> Handler:
    """Connection n (from 1) answers `answers(n)` requests (None: all), then closes on the
    next one without a byte, after `delay` seconds: a server whose idle timeout fired while
    the client was reusing the connection."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        number, served = len(connections), 0
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # the client closed it
                return
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            if served == answers(number):
                await asyncio.sleep(delay)  # the dead attempt takes a while to show
                writer.close()
                return
            served += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
            await writer.drain()

    return serve


async def _send(count: int, answers: Callable[[int], int | None], delay: float = 0.0,
                ) -> tuple[list[RequestRecord], StreamClient, int]:
    """`count` requests one after the other; the records, the client, the connections."""
    connections: list[int] = []
    server = await asyncio.start_server(_server(connections, answers, delay), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = StreamClient(parse_target(f"http://127.0.0.1:{port}"), "/v1/chat/completions")
    records = [RequestRecord(str(i)) for i in range(count)]
    try:
        for record in records:
            await client.send(b"{}", record)
    finally:
        client.close()
        server.close()
    return records, client, len(connections)


def test_a_request_on_a_dropped_keepalive_connection_is_retried_once_and_counted() -> None:
    (first, second), _, _ = asyncio.run(_send(2, lambda n: 1, DROP_AFTER_S))
    assert first.ok and not first.retried
    assert second.ok and second.retried, (second.error_kind, second.error_message)
    # its latency is the answered attempt's, not the dead one's
    assert (second.end_ns - second.start_ns) / 1e9 < DROP_AFTER_S


def test_a_server_that_drops_every_kept_connection_gets_a_new_one_per_request() -> None:
    records, client, connections = asyncio.run(_send(8, lambda n: 1))
    assert all(r.ok for r in records)
    # two dead reuses tell the habit; after them no request is sent on a dead connection
    assert [r.retried for r in records] == [False, True, True] + [False] * 5
    assert client.keep_alive is False
    assert connections == 8  # one per request: the two dead reuses were on earlier ones


def test_races_with_an_idle_timeout_between_good_reuses_keep_connections_kept() -> None:
    # the first connection is dropped at its 2nd request, the second at its 3rd (after a
    # reuse that worked); every other reuse works
    records, client, connections = asyncio.run(_send(8, {1: 1, 2: 2}.get))
    assert all(r.ok for r in records)
    assert [r.retried for r in records] == [False, True, False, True] + [False] * 4
    assert client.keep_alive is True and client.dead_reuses == 0
    assert connections == 3
