"""Let a replica's requests finish once the router no longer sends it any.

What vllm-router 0.1.17 does (docs/fleet.md, tried against it): `remove_worker` returns at
once; the streams already on that worker run to their end; no request reaches the worker
after the call returned. A request the router picked the worker for just before can still
be on its way, not yet counted by the replica: the router's own counters say so (it counts
an attempt when sent and its outcome when the answer's head came back). The drain is over
when, twice in a row, the replica's `vllm:num_requests_running` + `vllm:num_requests_waiting`
are 0 and the router has no attempt to it without an outcome, or has had the same number
of them for ROUTER_STILL_S (abandoned by their clients: the router never counts their outcome).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.errors import OrchError
from orchestrator.fleet.records import Drained
from orchestrator.router_client import RouterClient, RouterCounters

_IN_FLIGHT = re.compile(r"^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+(\S+)")
SETTLED_POLLS = 2  # zero seen this many times in a row: a request in transit shows up by then
# The router's attempts without an outcome that have not moved for this long are not in
# transit: a client that gave up before the answer's head leaves one behind for good.
ROUTER_STILL_S = 2.0


def in_flight_of(lines: Iterable[str]) -> int:
    """Requests running or waiting, from a vLLM /metrics page (every engine summed)."""
    total = 0.0
    for line in lines:
        found = _IN_FLIGHT.match(line)
        if found is not None:
            try:
                value = float(found.group(1))
            except ValueError:
                continue
            if math.isfinite(value):
                total += value
    return int(total)


def pending_at_router(counters: RouterCounters, url: str) -> int:
    """Attempts the router sent to `url` whose answer's head has not come back yet."""
    done = counters.succeeded.get(url, 0.0) + counters.failed.get(url, 0.0)
    return max(0, int(counters.processed.get(url, 0.0) - done))


def replica_in_flight(url: str, timeout: float = 5.0) -> int | None:
    """The replica's requests in flight; None when it does not answer (nothing to wait for)."""
    import httpx

    try:
        answer = httpx.get(f"{url.rstrip('/')}/metrics", timeout=timeout, trust_env=False)
    except httpx.HTTPError:
        return None
    if answer.status_code != 200:
        return None
    return in_flight_of(answer.text.splitlines())


def _router_pending(router: RouterClient, url: str) -> int:
    if router.metrics_url is None:
        return 0
    try:
        return pending_at_router(router.counters(), url)
    except OrchError:
        return 0  # the router is gone: it sends nothing more


@dataclass
class _Looks:
    """What the drain saw so far: zero looks in a row, the router's count and since when."""

    quiet: int = 0
    pending: int = -1
    pending_since: float = 0.0

    def settled(self, here: int | None, pending: int, now: float) -> bool:
        if pending != self.pending:
            self.pending, self.pending_since = pending, now
        router_done = pending == 0 or now - self.pending_since >= ROUTER_STILL_S
        self.quiet = self.quiet + 1 if not here and router_done else 0
        return self.quiet >= SETTLED_POLLS


def drain(url: str, router: RouterClient, *, timeout_s: float, every_s: float = 0.1,
          stop: threading.Event | None = None, in_flight: int | None = None,
          router_load: int | None = None) -> Drained:
    """Wait until nothing is in flight on `url` (already out of the router), at most
    `timeout_s`; `stop` ends the wait early (the caller is going away). `in_flight`: the
    replica's count as the drain begins, when the caller read it already."""
    stop = stop or threading.Event()
    start = time.monotonic()
    first = in_flight if in_flight is not None else replica_in_flight(url)
    drained = Drained(in_flight=first or 0, router_load=router_load)
    looks, here, pending = _Looks(), first, 0
    while True:
        here, pending = replica_in_flight(url), _router_pending(router, url)
        if looks.settled(here, pending, time.monotonic()):
            break
        if time.monotonic() - start >= timeout_s:
            drained.timed_out = True
            break
        if stop.wait(every_s):
            break
    drained.seconds = round(time.monotonic() - start, 3)
    drained.left = here or 0
    drained.router_unanswered = pending
    return drained
