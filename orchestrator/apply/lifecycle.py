"""The stages after converge, per host: ready -> smoke -> bench (bench.py), then collect
(collect.py, always).

They run in the host's worker thread through one reach of the service (a direct URL, or an
SSH port forward), record a step outcome each, and write their artifacts into the run folder.
A failure ends the later stages of that host (collect still runs) and never the other hosts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from orchestrator.apply.collect import collect
from orchestrator.apply.smoke import run_smoke
from orchestrator.errors import (
    LockBusy,
    OrchError,
    ServiceError,
    SmokeFailed,
)
from orchestrator.events import Emit, StageEvent
from orchestrator.facts import Facts
from orchestrator.inventory import Inventory
from orchestrator.plan.models import Plan
from orchestrator.plan.secrets import substitute
from orchestrator.runs.outcome import HostOutcome, StepOutcome
from orchestrator.runs.run_records import Startup
from orchestrator.runs.writer import RunFolder
from orchestrator.server_client import ServerClient
from orchestrator.service import control
from orchestrator.service.diagnosis import explain_death
from orchestrator.service.lock import LockGuard
from orchestrator.service.step import ServiceStep
from orchestrator.transport.base import Transport

if TYPE_CHECKING:
    from orchestrator.apply.bench import BenchStage


@dataclass
class Lifecycle:
    plan: Plan
    secrets: dict[str, str]
    inventory: Inventory
    folder: RunFolder | None
    console: Console
    service_step: ServiceStep | None
    skip: set[str] = field(default_factory=set)
    base_dir: Path | None = None
    units: list[ServiceStep] = field(default_factory=list)  # every process whose log to keep
    resume: bool = False  # `--resume`: the run folder holds an earlier part of this run

    @property
    def api_key(self) -> str | None:
        assert self.plan.service is not None
        key = self.plan.service.api_key
        return substitute(key, self.secrets) if key else None

    def __call__(self, transport: Transport, facts: Facts, outcome: HostOutcome, emit: Emit,
                 guard: LockGuard) -> None:
        try:
            if self.service_step is not None and "service" not in self.skip and \
                    not outcome.failed:  # a failed converge: only the logs are collected
                with control.reach(transport, self.inventory, self.plan) as base_url:
                    outcome.extra["service_url"] = base_url
                    stages: list[tuple[str, Callable[[], str]]] = [
                        ("ready", lambda: self._ready(transport, base_url, outcome, emit, guard))]
                    if self.plan.smoke:
                        stages.append(("smoke", lambda: self._smoke(transport, base_url, outcome)))
                    if self.plan.bench:
                        stages.append(("bench", lambda: self._bench()(transport, base_url, outcome,
                                                                      emit, guard)))
                    for name, body in stages:
                        if outcome.failed or name in self.skip:
                            why = "--skip" if name in self.skip else "an earlier stage failed"
                            outcome.steps.append(StepOutcome(step=name, status="skipped"))
                            emit(StageEvent(outcome.host, stage=name, status="skipped",
                                            message=why))
                        else:
                            self._stage(outcome, emit, name, body)
        finally:
            self._stage(outcome, emit, "collect", lambda: self._collect(transport, outcome))

    def _bench(self) -> BenchStage:
        from orchestrator.apply.bench import BenchStage  # the load generator: not for a no-op

        assert self.service_step is not None
        return BenchStage(self.plan, self.service_step, self.folder, self.console, self.api_key,
                          base_dir=self.base_dir, resume=self.resume)

    def _collect(self, transport: Transport, outcome: HostOutcome) -> str:
        if self.folder is None:
            return ""
        units = self.units or ([self.service_step] if self.service_step is not None else [])
        return collect(transport, outcome.host, self.plan, self.folder, units)

    # -- bookkeeping ------------------------------------------------------------------

    def _stage(self, outcome: HostOutcome, emit: Emit, name: str, body: Any) -> None:
        started = time.monotonic()
        emit(StageEvent(outcome.host, stage=name, status="running"))
        try:
            message = body() or ""
            step = StepOutcome(step=name, status="ok", seconds=time.monotonic() - started)
            emit(StageEvent(outcome.host, stage=name, status="ok",
                            message=f"{message} ({step.seconds:.1f}s)".strip()))
        except OrchError as error:
            step = StepOutcome(step=name, status="failed", seconds=time.monotonic() - started,
                               error=str(error))
            if isinstance(error, LockBusy):  # another took the locks: exit 75, as at a step
                outcome.exit_code = error.exit_code
            emit(StageEvent(outcome.host, stage=name, status="failed", message=str(error)))
        outcome.steps.append(step)


    def _startup(self, host: str, startup: Startup) -> None:
        if self.folder is not None:
            self.folder.write_startup(host, startup)

    # -- stages -----------------------------------------------------------------------

    def _ready(self, transport: Transport, base_url: str, outcome: HostOutcome, emit: Emit,
               guard: LockGuard) -> str:
        step = self.service_step
        assert step is not None
        launched = any(s.step == "service" and s.status == "changed" for s in outcome.steps)
        try:
            done = control.ready(transport, step, self.plan, base_url=base_url,
                                 api_key=self.api_key, launched=launched, emit=emit,
                                 still_ours=lambda wait: guard.check("during the start-up", wait))
        except ServiceError as error:
            if self.folder is not None:
                self.folder.write_diagnosis(outcome.host, error.diagnoses)
            raise
        if done.readiness is None:
            if not self.resume:  # resumed: startup.json keeps the start-up the run had
                self._startup(outcome.host, Startup(already_running=True, url=base_url))
            return f"{base_url} serves {done.model} (already running)"
        if self.resume:
            emit(StageEvent(outcome.host, stage="ready", status="changed",
                            message="the server was started again: the figures of this "
                                    "resumed run span two start-ups"))
        ready = done.readiness
        startup = Startup(seconds=round(ready.seconds, 3), restarts=ready.restarts,
                          phases=ready.phases, facts=ready.facts, url=base_url,
                          start=done.start, compile_cache=done.compile_cache)
        self._startup(outcome.host, startup)
        outcome.extra["startup_s"] = round(ready.seconds, 3)
        took = startup.took()
        start = f"{done.start} start, " if done.start else ""
        return f"{base_url} serves {done.model}" + (f"; {start}{took}" if took else "")

    def _smoke(self, transport: Transport, base_url: str, outcome: HostOutcome) -> str:
        assert self.service_step is not None
        host = transport.host
        model = self.service_step.spec.served_names[0]
        failed: list[str] = []
        with ServerClient(base_url, api_key=self.api_key) as client:
            for check in self.plan.smoke:
                result = run_smoke(check, client=client, model=model)
                if self.folder is not None:
                    self.folder.write_smoke(host, check.name, result.to_json())
                if not result.passed:
                    failed.append(f"{check.name}: " + "; ".join(result.failures))
            why = ""
            if failed and not _healthy(client):  # the engine died under the checks: say why
                why = "\n  the server is gone or unhealthy" + explain_death(transport, self.service_step, self.folder)[0]
        if failed:
            raise SmokeFailed(f"{host}: {len(failed)} of {len(self.plan.smoke)} smoke check(s) "
                              "failed:\n  " + "\n  ".join(failed) + why)
        return f"{len(self.plan.smoke)} passed"


def _healthy(client: ServerClient) -> bool:
    try:
        return client.health() == 200
    except OrchError:
        return False


