"""Load shapes: closed loop (C workers back to back), batch (C at once, until all finish)
and open loop (requests due at precomputed arrival times), each stoppable mid-way.

A `Stop` ends a run early: on Ctrl-C the running requests are cancelled at once (and
recorded as such); when the server is gone (connections refused) they get a short grace
to fail on their own. What finished is kept either way; the caller marks it partial.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from orchestrator.bench.arrivals import arrival_offsets
from orchestrator.bench.client import StreamClient
from orchestrator.bench.request_record import RequestRecord

_perf_ns = time.perf_counter_ns
GONE_AFTER_REFUSALS = 2  # connections refused in a row before the server counts as gone
GONE_GRACE_S = 1.0
HEALTH_EVERY_S = 0.5  # at most one health probe per this interval, and only after failures
# failures after which the server's health is worth a look (an engine that died answers
# every request with an error at once, and would otherwise run through the whole sweep)
_SUSPECT_PREFIXES = ("http_5", "stream_error", "connection_closed", "finish_error", "bad_response")


class Stop:
    """Why and whether the current run must end early (first reason wins)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason: str | None = None
        self.signum: int | None = None  # when a signal asked for it
        self.detail: str | None = None  # what went wrong, when the reason alone does not say

    def set(self, reason: str, detail: str | None = None) -> None:
        if self.reason is None:
            self.reason = reason
            self.detail = detail
        self.event.set()

    @property
    def is_set(self) -> bool:
        return self.event.is_set()


async def stop_unless(stop: Stop, holds: Callable[[], bool], every: float = 1.0) -> None:
    """Until cancelled: `stop` ("lock_lost") once `holds()` says an apply's host locks are
    no longer its own (another took them over); asked every `every` seconds."""
    while not stop.is_set:
        if not holds():
            stop.set("lock_lost")
            return
        await asyncio.sleep(every)


@dataclass(frozen=True)
class Shape:
    """What one run sends."""

    mode: Literal["closed", "batch", "rate"]
    concurrency: int = 1
    rate: float = 0.0
    count: int | None = None  # requests; None means run for `duration`
    duration_s: float | None = None
    arrivals: Literal["poisson", "constant"] = "poisson"
    burstiness: float = 1.0
    seed: int = 0
    max_in_flight: int | None = None  # rate levels: arrivals beyond it wait for a slot
    # (k, n): the k-th of n client processes, which sends every n-th arrival of the level's
    # schedule from the k-th on (rate levels; closed and batch shares are their own shapes)
    part: tuple[int, int] = (0, 1)


class Bodies(Protocol):
    """What a run sends: request i's ready body (workload.Workload)."""

    def body(self, index: int) -> bytes: ...


@dataclass
class RequestRun:
    """One run of requests (a level's warm-up, or one of its repeats): their records and its
    wall and CPU time."""

    records: list[RequestRecord] = field(default_factory=list)
    origin_ns: int = 0
    end_ns: int = 0
    cpu_s: float = 0.0
    stopped: str | None = None
    # How late the event loop woke for a timer due every LAG_TICK_S: the load generator's own
    # saturation, or the controller's CPU taken by others (either way, it sent and read late)
    loop_lags_s: list[float] = field(default_factory=list)
    # one run of each client process when the level's load was split (client_processes.py):
    # their records are this run's, merged
    parts: list[RequestRun] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return max(0.0, (self.end_ns - self.origin_ns) / 1e9)


async def run_requests(
    client: StreamClient,
    workload: Bodies,
    shape: Shape,
    stop: Stop,
    *,
    id_prefix: str,
    warmup: bool = False,
    run: RequestRun | None = None,
) -> RequestRun:
    """Run one run until its requests are done or `stop` is set. Pass `run` to watch
    its records fill while it runs (progress display)."""
    run = run if run is not None else RequestRun()
    records = run.records

    def new_record(index: int, scheduled_ns: int = 0) -> RequestRecord:
        record = RequestRecord(str(uuid.uuid4()), warmup=warmup, scheduled_ns=scheduled_ns,
                               label=id_prefix, index=index)
        records.append(record)
        return record

    driver = _driver(shape, stop, new_record, _Sender(client, workload, stop).send, run)
    cpu0 = time.process_time()
    run.origin_ns = _perf_ns()
    ticks = asyncio.ensure_future(_loop_lag(run.loop_lags_s))
    try:
        await _drive(driver, stop)
    finally:
        ticks.cancel()
    run.end_ns = _perf_ns()
    run.cpu_s = time.process_time() - cpu0
    run.stopped = stop.reason
    return run


class _Sender:
    """Sends one request; after a failure that may mean the server went, asks its health
    (at most every HEALTH_EVERY_S) and stops the run when it is gone or unhealthy."""

    def __init__(self, client: StreamClient, workload: Bodies, stop: Stop) -> None:
        self.client = client
        self.workload = workload
        self.stop = stop
        self.last_probe = 0

    async def send(self, index: int, record: RequestRecord) -> None:
        client, stop = self.client, self.stop
        await client.send(self.workload.body(index), record)
        if client.refused_in_a_row >= GONE_AFTER_REFUSALS:
            stop.set("server_gone")
        elif (
            record.error_kind is not None
            and record.error_kind.startswith(_SUSPECT_PREFIXES)
            and not stop.is_set
            and _perf_ns() - self.last_probe > HEALTH_EVERY_S * 1e9
        ):
            self.last_probe = _perf_ns()
            status = await client.health()
            if status is None:
                stop.set("server_gone")
            elif status == 503:
                stop.set("server_unhealthy")


def _driver(shape: Shape, stop: Stop, new_record: NewRecord, send: Send,
            run: RequestRun) -> Callable[[], Awaitable[None]]:
    """What sends the run's requests, by its shape."""
    if shape.mode == "closed":
        return lambda: _closed(shape, stop, new_record, send)
    if shape.mode == "batch":
        return lambda: _batch(shape, stop, new_record, send)
    return lambda: _open(shape, stop, new_record, send, run)


async def _drive(driver: Callable[[], Awaitable[None]], stop: Stop) -> None:
    """Run the driver until it ends or `stop` is set: then cancel it, after a grace for
    the requests in flight when the server is gone (they fail on their own)."""
    task = asyncio.ensure_future(driver())
    waiter = asyncio.ensure_future(stop.event.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            if stop.reason in ("server_gone", "server_unhealthy"):
                await asyncio.wait({task}, timeout=GONE_GRACE_S)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()


LAG_TICK_S = 0.02  # 50 wake-ups a second: nothing beside a level's token arrivals


async def _loop_lag(lags: list[float]) -> None:
    """Until cancelled: how late each timer of the loop fired (seconds)."""
    while True:
        due = time.perf_counter() + LAG_TICK_S
        await asyncio.sleep(LAG_TICK_S)
        lags.append(max(0.0, time.perf_counter() - due))


NewRecord = Callable[..., RequestRecord]
Send = Callable[[int, RequestRecord], Awaitable[None]]


async def _closed(shape: Shape, stop: Stop, new_record: NewRecord, send: Send) -> None:
    counter = itertools.count()
    deadline = _perf_ns() + int(shape.duration_s * 1e9) if shape.duration_s else 0

    async def worker() -> None:
        while not stop.is_set:
            index = next(counter)
            if shape.count is not None and index >= shape.count:
                return
            if deadline and _perf_ns() >= deadline:
                return
            await send(index, new_record(index))

    await asyncio.gather(*(worker() for _ in range(shape.concurrency)))


async def _batch(shape: Shape, stop: Stop, new_record: NewRecord, send: Send) -> None:
    deadline = _perf_ns() + int(shape.duration_s * 1e9) if shape.duration_s else 0
    index = 0
    while not stop.is_set:
        if shape.count is not None and index >= shape.count:
            return
        if deadline and _perf_ns() >= deadline:
            return
        size = shape.concurrency
        if shape.count is not None:
            size = min(size, shape.count - index)
        batch = [(i, new_record(i)) for i in range(index, index + size)]
        index += size
        await asyncio.gather(*(send(i, record) for i, record in batch))


async def _open(
    shape: Shape, stop: Stop, new_record: NewRecord, send: Send, run: RequestRun
) -> None:
    count = shape.count
    if count is None:  # a duration: as many arrivals as fit
        count = max(1, int((shape.duration_s or 0) * shape.rate) + 1)
    offsets = arrival_offsets(
        count, shape.rate, kind=shape.arrivals, burstiness=shape.burstiness, seed=shape.seed
    )
    if shape.count is None and shape.duration_s is not None:
        offsets = [o for o in offsets if o < shape.duration_s] or [0.0]
    process, processes = shape.part
    offsets = offsets[process::processes]
    origin = run.origin_ns
    tasks: list[asyncio.Task[None]] = []
    if shape.max_in_flight is not None:  # as vllm bench serve's semaphore: wait, then send
        slots = asyncio.Semaphore(shape.max_in_flight)
        unlimited = send

        async def send(index: int, record: RequestRecord) -> None:
            async with slots:
                await unlimited(index, record)

    try:
        for index, offset in enumerate(offsets):
            due = origin + int(offset * 1e9)
            delay = (due - _perf_ns()) / 1e9
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.event.wait(), delay)
            if stop.is_set:
                break
            tasks.append(asyncio.ensure_future(send(index, new_record(index, due))))
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
