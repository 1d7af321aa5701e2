"""How fast and how truthful is orch's streaming client? A side-by-side benchmark.

Runs orch's client (`orchestrator.bench.client.StreamClient`), a plain aiohttp loop and raw
clients (`RawStream`: a bare `asyncio.Protocol` on a kept connection that splits events and
`json.loads` each, on asyncio's loop and on uvloop's when installed) against
`benchmarks/stream_server.py`, the client pinned to one core and the server to another:

1. ingest: a zero-delay server streaming 1,024 tokens per request; reports streamed tokens
   per second of client CPU (tokens per client core), orch's rate over each client's
   (`orch ÷ this`, same run), CPU microseconds per token, and the wall-clock rate, at C=64
   and C=256. One more raw row parses no JSON at all (it finds a non-empty content or
   reasoning string with `bytes.find`): the floor of any client that splits events;
2. timing: a server with known delays (TTFT 200 ms, 20 ms between tokens, 32 reasoning
   tokens first, 64 tokens); the server records when each request arrived and when each
   token was written (the same monotonic clock), so every client's TTFT and ITL error is
   exact: measured TTFT - (first write - arrival), measured gap - written gap.
   Reported at C=1, 32 and 128: mean and p99 TTFT error, mean and p99 |ITL error|, and the
   arrival lag (token stamp - server write: the client's own share of the error) and the
   request path (server read - client start: the request's way to the server, including
   the server getting round to reading it, the rest of the TTFT error). Each
   worker sends one unmeasured request first, so connection set-up is not counted.

The script raises its priority (nice -10, when allowed) to keep the shared machine's other
work from landing in the figures; the servers it starts inherit it.

Usage: .venv/bin/python benchmarks/loadgen.py [--quick] [--continuous-usage]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stream_server import running_stream_server

from orchestrator.bench.client import StreamClient
from orchestrator.bench.http_stream import parse_target
from orchestrator.bench.request_record import RequestRecord
from orchestrator.bench.stamping import stamping_loop
from orchestrator.bench.stats import percentile

BODY = {
    "model": "stream-test",
    "messages": [{"role": "user", "content": "Write a detailed step-by-step guide to benchmarking."}],
    "max_tokens": 1024,
    "stream": True,
    "stream_options": {"include_usage": True},
}


@dataclass
class Timeline:
    """What a client saw of one request: start and token arrival stamps (perf ns)."""

    request_id: str
    start_ns: int = 0
    token_ns: list[int] = field(default_factory=list)


Runner = Callable[[str, int, int, int], Awaitable[list[Timeline]]]


async def run_orch(url: str, concurrency: int, requests: int, max_tokens: int) -> list[Timeline]:
    client = StreamClient(parse_target(url), "/v1/chat/completions", timeout=120)
    body = json.dumps({**BODY, "max_tokens": max_tokens}, separators=(",", ":")).encode()
    records: list[RequestRecord] = []
    counter = iter(range(requests))

    async def worker() -> None:
        await client.send(body, RequestRecord("warm-up"))  # connect before measuring
        for index in counter:
            record = RequestRecord(f"orch-{index}")
            records.append(record)
            await client.send(body, record)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    client.close()
    failed = [r for r in records if not r.ok]
    if failed:
        raise SystemExit(f"orch client: {len(failed)} failed, e.g. {failed[0].error_message}")
    return [Timeline(r.request_id, r.start_ns, r.token_ns) for r in records]


async def run_aiohttp(url: str, concurrency: int, requests: int, max_tokens: int) -> list[Timeline]:
    """The plain loop most tools write: iterate lines, stamp, json.loads, look at the delta."""
    import aiohttp

    body = {**BODY, "max_tokens": max_tokens}
    timelines: list[Timeline] = []
    counter = iter(range(requests))
    connector = aiohttp.TCPConnector(limit=0)  # no pool cap: measure the client, not its config
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            warm = {"x-request-id": "warm-up"}
            async with session.post(f"{url}/v1/chat/completions", json=body, headers=warm) as response:
                await response.read()  # connect before measuring
            for index in counter:
                timeline = Timeline(f"aiohttp-{index}")
                timelines.append(timeline)
                timeline.start_ns = time.perf_counter_ns()
                headers = {"x-request-id": timeline.request_id}
                async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as response:
                    async for line in response.content:
                        now = time.perf_counter_ns()
                        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                            continue
                        chunk = json.loads(line[6:])
                        choices = chunk.get("choices")
                        if choices:
                            delta = choices[0].get("delta") or {}
                            if delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"):
                                timeline.token_ns.append(now)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return timelines


class RawStream(asyncio.Protocol):
    """A hand-written client on a bare protocol: stamp each read, split events on blank
    lines, `json.loads` each one and look at the delta (the aiohttp loop's work without
    aiohttp). No chunk decoding, no usage, no errors: it knows the test server's bytes and
    nothing else. With `parse=False` it only looks for a non-empty content or reasoning
    string (the floor of any loop that splits events)."""

    parse = True

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.timeline = Timeline("")
        self.done: asyncio.Future[None] | None = None
        self.tail = b""
        self.finishing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        events = (self.tail + data).split(b"\n\n")
        self.tail = events.pop()
        stamps = self.timeline.token_ns
        for event in events:
            if b"data: [DONE]" in event:
                self.finishing = True
            elif self.parse:
                choices = json.loads(event[event.find(b"data: ") + 6 :]).get("choices")
                if choices:
                    delta = choices[0].get("delta") or {}
                    if delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"):
                        stamps.append(now)
            else:
                for key in (b'"content":"', b'"reasoning":"', b'"reasoning_content":"'):
                    at = event.find(key)
                    if at >= 0 and event[at + len(key)] != 0x22:  # not an empty string
                        stamps.append(now)
                        break
        if self.finishing and self.tail.endswith(b"0\r\n\r\n") and self.done is not None:
            self.done.set_result(None)


class RawScan(RawStream):
    parse = False


async def run_raw(url: str, concurrency: int, requests: int, max_tokens: int,
                  protocol_class: type[RawStream] = RawStream) -> list[Timeline]:
    """One raw protocol per worker on a kept connection; the same request bytes as orch's."""
    target = parse_target(url)
    loop = asyncio.get_running_loop()
    body = json.dumps({**BODY, "max_tokens": max_tokens}, separators=(",", ":")).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {target.host_header}\r\n"
            "Accept: text/event-stream\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nx-request-id: ").encode()
    timelines: list[Timeline] = []
    counter = iter(range(requests))

    async def one(protocol: RawStream, timeline: Timeline) -> None:
        assert protocol.transport is not None
        protocol.timeline, protocol.tail, protocol.finishing = timeline, b"", False
        protocol.done = loop.create_future()
        timeline.start_ns = time.perf_counter_ns()
        protocol.transport.write(head + timeline.request_id.encode() + b"\r\n\r\n" + body)
        await protocol.done

    async def worker() -> None:
        _, protocol = await loop.create_connection(protocol_class, target.host, target.port)
        await one(protocol, Timeline("warm-up"))  # connect before measuring
        for index in counter:
            timeline = Timeline(f"raw-{index}")
            timelines.append(timeline)
            await one(protocol, timeline)
        assert protocol.transport is not None
        protocol.transport.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return timelines


def uvloop_factory() -> asyncio.AbstractEventLoop:
    import uvloop

    return uvloop.new_event_loop()


def measure(runner: Runner, url: str, concurrency: int, requests: int, max_tokens: int,
            loop_factory: Callable[[], asyncio.AbstractEventLoop] = stamping_loop,
            ) -> tuple[list[Timeline], float, float]:
    gc.collect()
    gc.freeze()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        with asyncio.Runner(loop_factory=loop_factory) as loop:
            timelines = loop.run(runner(url, concurrency, requests, max_tokens))
    finally:
        gc.unfreeze()
    return timelines, time.process_time() - cpu0, time.perf_counter() - wall0


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


async def run_raw_scan(url: str, concurrency: int, requests: int, max_tokens: int) -> list[Timeline]:
    return await run_raw(url, concurrency, requests, max_tokens, RawScan)


def clients(scan: bool = False) -> dict[str, tuple[Runner, LoopFactory]]:
    """The clients compared, with the loop each runs on; raw uvloop when it is installed;
    `scan`: also the raw clients that parse no JSON (the ingest floor)."""
    chosen: dict[str, tuple[Runner, LoopFactory]] = {
        "orch": (run_orch, stamping_loop),
        "aiohttp": (run_aiohttp, stamping_loop),
        "raw asyncio": (run_raw, asyncio.new_event_loop),
    }
    if importlib.util.find_spec("uvloop") is not None:
        chosen["raw uvloop"] = (run_raw, uvloop_factory)
    if scan:
        chosen["raw asyncio, no JSON"] = (run_raw_scan, asyncio.new_event_loop)
        if "raw uvloop" in chosen:
            chosen["raw uvloop, no JSON"] = (run_raw_scan, uvloop_factory)
    return chosen


def ingest_table(quick: bool) -> Table:
    table = Table(title="Ingest: zero-delay server, 1,024 tokens per request, client on one core")
    for column in ("client", "C", "tokens", "tok/s per client core", "orch ÷ this", "CPU µs/token",
                   "wall tok/s"):
        table.add_column(column, justify="right" if column != "client" else "left")
    with running_stream_server("--tokens", "1024", cpu=1) as url:
        for concurrency in (64, 256):
            requests = concurrency * (2 if quick else 4)
            rates: dict[str, float] = {}
            for name, (runner, loop_factory) in clients(scan=True).items():
                timelines, cpu, wall = measure(runner, url, concurrency, requests, 1024, loop_factory)
                tokens = sum(len(t.token_ns) for t in timelines)
                if tokens != requests * 1024:
                    raise SystemExit(f"{name}: {tokens:,} tokens seen, {requests * 1024:,} sent")
                rates[name] = tokens / cpu
                table.add_row(
                    name, str(concurrency), f"{tokens:,}", f"{tokens / cpu:,.0f}",
                    f"{rates['orch'] / rates[name]:.2f}x",
                    f"{cpu / tokens * 1e6:.2f}", f"{tokens / wall:,.0f}",
                )
    return table


def errors(
    timelines: list[Timeline], truth: dict[str, dict[str, list[int] | int]]
) -> tuple[list[float], list[float], list[float], list[float]]:
    """TTFT errors, |ITL| errors, arrival lags (token stamp - server write) and request
    paths (server read - client start), in ms."""
    ttft_errors: list[float] = []
    paths: list[float] = []
    itl_errors: list[float] = []
    lags: list[float] = []
    for t in timelines:
        server = truth[t.request_id]
        writes = server["write_ns"]
        assert isinstance(writes, list)
        recv = server["recv_ns"]
        assert isinstance(recv, int)
        if len(t.token_ns) != len(writes):
            raise SystemExit(f"{t.request_id}: {len(t.token_ns)} tokens seen, {len(writes)} written")
        ttft_errors.append(((t.token_ns[0] - t.start_ns) - (writes[0] - recv)) / 1e6)
        paths.append((recv - t.start_ns) / 1e6)
        for i in range(1, len(writes)):
            itl_errors.append(abs((t.token_ns[i] - t.token_ns[i - 1]) - (writes[i] - writes[i - 1])) / 1e6)
        lags.extend((seen - written) / 1e6 for seen, written in zip(t.token_ns, writes, strict=True))
    return ttft_errors, itl_errors, lags, paths


def timing_table(quick: bool) -> Table:
    table = Table(title="Timing: TTFT 200 ms, ITL 20 ms, 32 reasoning tokens first, 64 tokens")
    for column in ("client", "C", "requests", "TTFT err mean (ms)", "TTFT err p99 (ms)", "|ITL err| mean (ms)",
                   "|ITL err| p99 (ms)", "arrival lag mean (ms)", "arrival lag p99 (ms)",
                   "request path mean (ms)"):
        table.add_column(column, justify="right" if column != "client" else "left")
    args = ("--tokens", "64", "--reasoning", "32", "--ttft-ms", "200", "--itl-ms", "20", "--record-timings")
    for concurrency in (1, 32, 128):
        requests = {1: 3 if quick else 8, 32: 64, 128: 128 if quick else 256}[concurrency]
        for name, (runner, loop_factory) in clients().items():
            with running_stream_server(*args, cpu=1) as url:
                timelines, _, _ = measure(runner, url, concurrency, requests, 64, loop_factory)
                truth = httpx.get(f"{url}/timings", timeout=30).json()
            ttft, itl, lag, path = errors(timelines, truth)
            ttft.sort()
            itl.sort()
            lag.sort()
            table.add_row(
                name, str(concurrency), str(requests), f"{sum(ttft) / len(ttft):+.2f}", f"{percentile(ttft, 99):+.2f}",
                f"{sum(itl) / len(itl):.3f}", f"{percentile(itl, 99):.3f}",
                f"{sum(lag) / len(lag):.3f}", f"{percentile(lag, 99):.3f}", f"{sum(path) / len(path):.3f}",
            )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--only", choices=["ingest", "timing"], help="run one part")
    parser.add_argument("--continuous-usage", action="store_true",
                        help="ask for usage in every chunk, as orch bench does of vLLM "
                             "(longer chunks, one more key to read)")
    args = parser.parse_args()
    if args.continuous_usage:
        BODY["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    with contextlib.suppress(OSError):
        os.nice(-10)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})  # the client: one core; the servers run on core 1
    console = Console(width=200)
    console.print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if args.only in (None, "ingest"):
        console.print(ingest_table(args.quick))
    if args.only in (None, "timing"):
        console.print(timing_table(args.quick))


if __name__ == "__main__":
    main()
