"""The router's run in a fleet's apply: wait until `min_ready` replicas serve (a P/D router:
until every replica's run ended, since it is launched with them), then converge its venv and
service like any host's, and after it: wait for its /health, register every replica that is
or becomes ready (add_worker), remove any other it lists, require its list to equal the ready
replicas, bench through it, collect its log.

Its place in the run is `router.name` (`hosts/<router.name>/`), on this machine (`router.on:
controller`) or an inventory host.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from orchestrator.apply.collect import collect
from orchestrator.apply.converge import HostJob, LockRequest, Stage
from orchestrator.apply.fleet import Fleet
from orchestrator.apply.hosts import HostRun
from orchestrator.errors import OrchError
from orchestrator.events import Emit, HostEnd, HostStart, StageEvent
from orchestrator.facts import Facts
from orchestrator.fleet.gate import ReplicaGate
from orchestrator.fleet.inventory import CONTROLLER
from orchestrator.fleet.registration import Registration, add_ready, settle
from orchestrator.fleet.router_ready import wait_router
from orchestrator.fleet.router_service import default_venv, pd_workers, router_plan, router_venv
from orchestrator.holder import Holder
from orchestrator.plan.models import Plan
from orchestrator.plan.replicas import Replica
from orchestrator.router_client import RouterClient
from orchestrator.runs.outcome import HostOutcome, StepOutcome, StepStatus
from orchestrator.runs.writer import RunFolder
from orchestrator.service import control
from orchestrator.service.launch import render_launch
from orchestrator.service.lock import LockGuard, lock_paths
from orchestrator.service.step import ServiceStep
from orchestrator.steps.base import Step
from orchestrator.steps.python_env import PythonEnvStep
from orchestrator.transport.base import Transport
from orchestrator.transport.connect import connect

# The sweep through the router: (router's transport, its URL, outcome, emit, guard) -> said.
BenchThrough = Callable[[Transport, str, HostOutcome, Emit, LockGuard], str]
# After it: relaunch and register again what the sweep lost (fleet_repair.py) -> said, changed.
RepairAfter = Callable[[RouterClient, Sequence[Replica], Emit], tuple[str, bool]]


@dataclass
class RouterRun:
    """The router's whole run: wait for the replicas, converge, the stages after."""

    fleet: Fleet
    check: bool
    emit: Emit
    holder: Holder
    folder: RunFolder | None = None
    skip: set[str] = field(default_factory=set)
    force_restart: bool = False
    wait: bool = False
    break_lock: bool = False
    bench: Callable[[ReplicaGate], BenchThrough | None] = lambda gate: None
    repair: RepairAfter | None = None

    def __call__(self, gate: ReplicaGate) -> HostOutcome:
        name = self.fleet.router.name
        if not self.check and not gate.wait_start(every=self.fleet.router.mode == "pd"):
            return self._not_started(gate)
        try:
            job = self.job(gate)
        except OrchError as error:
            outcome = HostOutcome(host=name, error=str(error))
            self.emit(HostStart(name))
            self.emit(HostEnd(name, failed=True, error=outcome.error))
            return outcome
        return HostRun(self.fleet.inventory, self.check, self.emit, connect)(job)

    def _not_started(self, gate: ReplicaGate) -> HostOutcome:
        name = self.fleet.router.name
        error = (f"{len(gate.ready)} of {len(self.fleet.replicas)} replicas serve, fewer than "
                 f"replicas.min_ready ({self.fleet.min_ready}): the router is not started")
        self.emit(HostStart(name))
        self.emit(HostEnd(name, failed=True, error=error))
        return HostOutcome(host=name, error=error)

    def job(self, gate: ReplicaGate) -> HostJob:
        """The router's steps (its venv, its service) and the stages after them."""
        fleet, router = self.fleet, self.fleet.router
        plan = router_plan(fleet.plan, self.venv(), router.name, pd_workers(
            gate.ready, {r.id: fleet.url(r) for r in gate.ready}))
        assert plan.python is not None
        step = ServiceStep(plan, render_launch(plan, venv_bin=f"{plan.python.venv}/bin"), {},
                           file_digests={}, force_restart=self.force_restart)
        lock = None if self.check else LockRequest(
            lock_paths(plan.python.venv, fleet.plan.name, router.name,
                       fleet.inventory.real(router.name)),
            self.holder, wait=self.wait, break_lock=self.break_lock)
        after: list[Stage] = [RouterStage(fleet, gate, plan, step, self.folder, self.skip,
                                          self.bench(gate), self.repair)]
        steps: list[Step] = [PythonEnvStep(plan.python, plan.install)]
        if "service" not in self.skip:
            steps.append(step)
        return HostJob(router.name, steps, after=after, lock=lock)

    def venv(self) -> str:
        router = self.fleet.router
        if router.venv is not None:
            return router.venv
        if router.on == CONTROLLER:
            return default_venv(os.path.expanduser("~"), router.version)
        with connect(router.name, self.fleet.inventory) as transport:
            return router_venv(router, transport)


@dataclass
class RouterStage:
    """After the router's converge: ready, register, bench, collect (each a step outcome)."""

    fleet: Fleet
    gate: ReplicaGate
    plan: Plan  # the router's own (router_service.py)
    step: ServiceStep
    folder: RunFolder | None
    skip: set[str]
    bench: BenchThrough | None
    repair: RepairAfter | None = None

    def __call__(self, transport: Transport, facts: Facts, outcome: HostOutcome, emit: Emit,
                 guard: LockGuard) -> None:
        said: dict[str, object] = {}
        outcome.extra["router"] = said
        try:
            if not outcome.failed and "service" not in self.skip:
                with router_urls(transport, self.fleet, self.plan) as (url, metrics_url):
                    said.update(url=url, metrics_url=metrics_url)
                    _stage(outcome, emit, "ready", lambda: (self._ready(transport, url, emit),
                                                            False))
                    if not outcome.failed:
                        _stage(outcome, emit, "register",
                               lambda: self._register(url, metrics_url, said, emit))
                    if self.bench is not None and not outcome.failed and \
                            "bench" not in self.skip:
                        bench = self.bench
                        _stage(outcome, emit, "bench",
                               lambda: (bench(transport, url, outcome, emit, guard), False))
                        self._repair(url, metrics_url, outcome, emit)
        finally:
            if self.folder is not None:
                folder = self.folder
                _stage(outcome, emit, "collect", lambda: (collect(
                    transport, outcome.host, self.plan, folder, [self.step]), False))

    def _repair(self, url: str, metrics_url: str, outcome: HostOutcome, emit: Emit) -> None:
        """After the sweep: what it lost relaunched and registered again (fleet_repair.py)."""
        repair = self.repair
        if repair is None or self.fleet.router.mode == "pd":
            return
        with RouterClient(url, metrics_url) as client:
            _stage(outcome, emit, "repair", lambda: repair(client, self.gate.ready, emit))

    def _ready(self, transport: Transport, url: str, emit: Emit) -> str:
        wait_router(transport, self.step, self.plan.health, url, emit)
        return f"{url} answers /health"

    def _register(self, url: str, metrics_url: str, said: dict[str, object],
                  emit: Emit) -> tuple[str, bool]:
        done = Registration()
        host = self.fleet.router.name
        with RouterClient(url, metrics_url) as client:
            listed = client.workers()
            for replica in self.gate.as_ready():
                if self.fleet.router.mode != "pd":
                    add_ready(client, self.fleet.url(replica), done, listed)
                emit(StageEvent(host, stage="register", status="running",
                                message=f"{replica.id} serves at {self.fleet.url(replica)}"))
            ready = [self.fleet.url(r) for r in self.gate.ready]
            workers = settle(client, ready, done) if self.fleet.router.mode != "pd" \
                else client.workers()
        said["workers"] = workers
        return f"{len(workers)} worker(s): {done.said()}", done.changed


def _stage(outcome: HostOutcome, emit: Emit, name: str,
           body: Callable[[], tuple[str, bool]]) -> None:
    """One stage as a step outcome: ok (or changed), or failed with its error."""
    started = time.monotonic()
    host = outcome.host
    emit(StageEvent(host, stage=name, status="running"))
    try:
        message, changed = body()
        status: StepStatus = "changed" if changed else "ok"
        step = StepOutcome(step=name, status=status, seconds=time.monotonic() - started)
        emit(StageEvent(host, stage=name, status=status,
                        message=f"{message} ({step.seconds:.1f}s)".strip()))
    except OrchError as error:
        step = StepOutcome(step=name, status="failed", seconds=time.monotonic() - started,
                           error=str(error))
        emit(StageEvent(host, stage=name, status="failed", message=str(error)))
    outcome.steps.append(step)


@contextlib.contextmanager
def router_urls(transport: Transport, fleet: Fleet, plan: Plan) -> Iterator[tuple[str, str]]:
    """The router's API and metrics as this machine reaches them (direct, or SSH forwards
    for a router listening on a remote host's loopback)."""
    assert plan.service is not None
    metrics = plan.model_copy(update={"service": plan.service.model_copy(
        update={"port": fleet.router.metrics_port})})
    with control.reach(transport, fleet.inventory, plan) as url, \
            control.reach(transport, fleet.inventory, metrics) as metrics_url:
        yield url, metrics_url
