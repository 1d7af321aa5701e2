"""A level benchmarked through vLLM's router: `FleetSampler`, the sampler (samplers.py) that
fills a level's `router` block (fleet_summary.py says what it holds).

Around each repeat it reads the router's counters (`RouterClient.counters()`: its metrics port,
`--router-metrics`) before and after, so the block has the requests per replica as the router
counted them; during the repeat it scrapes every worker's own `/metrics` (server_metrics.py's
`Scraper`, one per worker, on its threads, never on the event loop that stamps tokens); where
the router's process runs on this machine (a loopback address), its CPU time from /proc.
GPU samplers of the replicas' hosts, where a caller has them (an apply), are run beside them
and their blocks kept per replica; a simulator replica has no GPU and says so.

A sweep against a router does not scrape `<router>/metrics` as a server's: the router passes
that GET to one worker at a time, and every such scrape would be a routed request in its counts.
Whether a URL is a router is asked once (`router_workers`: `GET /list_workers`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx

from orchestrator import http_deadline
from orchestrator.bench.fleet_summary import (
    BLOCK,
    EXTRA_NAMES,
    merge_fleet,
    router_added_ms,
    summarize_fleet,
)
from orchestrator.bench.samplers import Sampler, Snapshot
from orchestrator.bench.server_info import ServerInfo, probe_server
from orchestrator.bench.server_metrics import Scraper, scrape_floor, wanted_names
from orchestrator.errors import BenchError, OrchError
from orchestrator.http_deadline import Deadline
from orchestrator.masking import mask
from orchestrator.plan.models import Bench
from orchestrator.router_client import RouterClient, RouterCounters

ROUTER_ADDED = "router_added_ms"  # a level figure: client E2E minus the replicas' own


MAX_LIST = 1024 * 1024  # a router's list of a few hundred workers is a few KB


def router_workers(root: str, timeout: float = 5.0) -> list[str] | None:
    """The router's workers when `root` is a vllm-router (`GET /list_workers` answers
    `{"urls": [...]}`), else None (a server, or nothing that answered so). Bounded as a
    scrape is: over `2 * timeout` after it began, at most MAX_LIST read."""
    try:
        with http_deadline.client(timeout) as client, Deadline(2 * timeout) as deadline, \
                client.stream("GET", f"{root.rstrip('/')}/list_workers",
                              extensions=deadline.extensions) as answer:
            if answer.status_code != 200:
                return None
            body = b""
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > MAX_LIST:
                    return None
        data = json.loads(body)
    except (httpx.HTTPError, ValueError):
        return None
    urls = data.get("urls") if isinstance(data, dict) else None
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        return None
    return [u.rstrip("/") for u in urls]


def local_pid(url: str, proc: Path = Path("/proc")) -> int | None:
    """The process listening on `url`'s port when its host is this machine's loopback (its
    socket's inode in /proc/net/tcp*, then the process holding it); None otherwise."""
    parsed = httpx.URL(url)
    if parsed.host not in ("127.0.0.1", "localhost", "::1") or parsed.port is None:
        return None
    inodes = set()
    for table in ("net/tcp", "net/tcp6"):
        with contextlib.suppress(OSError):
            for line in (proc / table).read_text().splitlines()[1:]:
                parts = line.split()
                if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == parsed.port:
                    inodes.add(f"socket:[{parts[9]}]")
    for pid in (p for p in proc.iterdir() if p.name.isdigit()) if inodes else ():
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (pid / "fd").iterdir()):
                return int(pid.name)
    return None


def cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float | None:
    """utime + stime of `pid` in seconds (None: gone or unreadable)."""
    try:
        fields = (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class FleetSnapshot(Snapshot):
    """What one repeat read of the fleet: the router's counts over it, each worker's
    /metrics snapshots, the GPU samplers' summaries and the router's CPU."""

    counted: RouterCounters | None = None
    replicas: Mapping[str, Sequence[Snapshot]] = field(default_factory=dict)
    gpus: Mapping[str, Any] = field(default_factory=dict)
    router_cpu: float | None = None
    problem: str = ""


@dataclass
class FleetSampler:
    """The router at `root` (its metrics at `metrics_url`, None: not given) and its
    `workers`; `interval`/`floor_s` as the server scraper's; `gpus`: a GPU sampler per worker
    URL, where the caller has one for that worker's host."""

    root: str
    metrics_url: str | None
    workers: Sequence[str]
    interval: float | None
    floor_s: float | None = None
    policy: str | None = None
    router_pid: int | None = None
    gpus: Mapping[str, Sampler] = field(default_factory=dict)
    block: ClassVar[str] = BLOCK
    repeat_keys: ClassVar[tuple[str, ...]] = ()
    _scrapers: dict[str, Scraper] = field(default_factory=dict)
    _before: RouterCounters | None = None
    _after: RouterCounters | None = None
    _cpu: tuple[float | None, float] = (None, 0.0)
    _router_cpu: float | None = None
    _problem: str = ""

    def __post_init__(self) -> None:
        wanted = (*wanted_names(), *EXTRA_NAMES)
        self._scrapers = {url: Scraper(f"{url}/metrics", self.interval, wanted=wanted,
                                       floor_s=self.floor_s) for url in self.workers}

    def _counters(self) -> RouterCounters | None:
        if self.metrics_url is None:
            self._problem = self._problem or ("the router's metrics URL is not known "
                                              "(orch bench --router-metrics URL)")
            return None
        try:
            with RouterClient(self.root, self.metrics_url, timeout=5.0) as client:
                counted = client.counters()
        except OrchError as error:
            self._problem = self._problem or f"router metrics at {self.metrics_url}: {error}"
            return None
        if not counted.healthy and not counted.processed:  # a router always has its workers' health
            self._problem = self._problem or (
                f"router metrics at {self.metrics_url}: no vllm_router_ counters (is it the "
                "router's --prometheus-port?)")
            return None
        return counted

    def start(self, origin_ns: int) -> None:
        self._problem, self._router_cpu = "", None
        self._before = self._counters()
        self._cpu = (cpu_seconds(self.router_pid) if self.router_pid else None, time.perf_counter())
        for sampler in (*self._scrapers.values(), *self.gpus.values()):
            sampler.start(origin_ns)

    def stop(self) -> None:
        for sampler in (*self._scrapers.values(), *self.gpus.values()):
            sampler.stop()
        self._after = self._counters()
        then, began = self._cpu
        now = cpu_seconds(self.router_pid) if self.router_pid else None
        wall = time.perf_counter() - began
        if then is not None and now is not None and wall > 0:
            self._router_cpu = round((now - then) / wall, 4)

    def snapshots(self) -> list[Snapshot]:
        counted = (self._after.minus(self._before)
                   if self._after is not None and self._before is not None else None)
        gpus = {url: s.summarize(s.snapshots()) for url, s in self.gpus.items()}
        return [FleetSnapshot(0.0, {}, counted, {url: s.snapshots() for url, s in self._scrapers.items()},
                              gpus, self._router_cpu, self._problem)]

    def summarize(self, snapshots: Sequence[Snapshot]) -> dict[str, Any]:
        seen = next((s for s in snapshots if isinstance(s, FleetSnapshot)), None)
        if seen is None:
            return summarize_fleet(None, {}, policy=self.policy, problem="nothing was read")
        return summarize_fleet(seen.counted, seen.replicas, gpus=seen.gpus, router_cpu=seen.router_cpu,
                               policy=self.policy, problem=seen.problem)

    def merge(self, repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        return merge_fleet(repeats)

    def level_figures(self, block: Mapping[str, Any] | None,
                      level: Mapping[str, Any]) -> dict[str, Any]:
        sent = sum(level.get(key) or 0 for key in ("completed", "failed"))
        added = router_added_ms(block, level.get("mean_e2el_ms"), sent or None)
        return {ROUTER_ADDED: added} if added is not None else {}


def fleet_server(server: ServerInfo, workers: Sequence[str], api_key: str | None,
                 timeout: float) -> ServerInfo:
    """What the sweep says it benchmarked when `server` (probed through the router, which
    asked one worker) fronts `workers`: a simulator, in its model time, only when every
    worker is one at the same time scale; a fleet with a real server, or simulators at
    different scales, is measured in wall time."""
    seen = []
    for url in workers:
        try:
            seen.append(probe_server(url, model=server.model, api_key=api_key, timeout=timeout))
        except OrchError:
            seen.append(ServerInfo(model=server.model))  # not asked: not taken for a simulator
    same = {(one.simulated, one.profile, one.time_scale) for one in seen}
    if len(same) == 1 and all(one.simulated for one in seen):
        return server
    versions = {one.version for one in seen}
    return ServerInfo(model=server.model, version=versions.pop() if len(versions) == 1 else None)


def fleet_of(root: str, server: ServerInfo, *, router_metrics: str | None, interval: float | None,
             policy: str | None, api_key: str | None, timeout: float) -> tuple[ServerInfo, FleetSampler | None]:
    """The server as the sweep shall say it, and the fleet sampler when `root` is a router
    (None: it is not one)."""
    workers = router_workers(root)
    if workers is None:
        return server, None
    server = fleet_server(server, workers, api_key, timeout)
    return server, FleetSampler(root, router_metrics, workers, interval,
                                scrape_floor(server.simulated, server.time_scale), policy, local_pid(root))


def routed(samplers: Sequence[Sampler]) -> bool:
    """Whether a sweep's samplers read a router's fleet: its server scraper then scrapes nothing
    through the router (`<router>/metrics` is one worker's at a time, each scrape a routed
    request in the counts)."""
    return any(s.block == BLOCK for s in samplers)


def with_fleet(root: str, server: ServerInfo, samplers: Sequence[Sampler], config: Bench, *,
               api_key: str | None, router_metrics: str | None,
               router_policy: str | None) -> tuple[ServerInfo, list[Sampler]]:
    """A sweep's server and samplers, the fleet sampler added when `root` is a router and
    none was given (a caller that samples the replicas' hosts passes its own); router
    options for a URL that is not a router are refused, not ignored."""
    if routed(samplers):
        return server, list(samplers)
    server, fleet = fleet_of(root, server, router_metrics=router_metrics, interval=config.metrics_interval,
                             policy=router_policy, api_key=api_key, timeout=config.request_timeout)
    if fleet is None and (router_metrics or router_policy):
        raise BenchError(f"{mask(root)} is not a vllm-router (no list of workers at /list_workers): "
                         "--router-metrics and --router-policy have no router",
                         hint="give the router's URL, or leave them out")
    return server, [*samplers, *([fleet] if fleet is not None else [])]


def _is_a_sampler(sampler: FleetSampler) -> Sampler:  # mypy checks the protocol here
    return sampler
