"""The bench stage: the plan's sweep against the ready server, with the GPU sampler the host
allows (nvidia-smi, else its DCGM exporter through a forwarded port); a server that dies
mid-sweep with no known cause is relaunched within the restart budget and the sweep goes on
from the level it cut; `--resume` keeps the levels an earlier part of the run finished."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator.bench.dcgm import DcgmSampler, answers, not_serving
from orchestrator.bench.gpu_telemetry import GpuSampler
from orchestrator.bench.samplers import Sampler
from orchestrator.bench.server_cpu import ServerCpuSampler
from orchestrator.bench.sweep import SweepResult, kept_levels, run_sweep
from orchestrator.engines import engine
from orchestrator.errors import BenchError, Interrupted
from orchestrator.events import Emit, StageEvent
from orchestrator.limits.verdicts import Judge, plan_facts, plateau_lines
from orchestrator.masking import mask
from orchestrator.plan.models import Bench, Plan
from orchestrator.runs.layout import BenchLayout
from orchestrator.runs.outcome import HostOutcome
from orchestrator.runs.writer import RunFolder
from orchestrator.service import control
from orchestrator.service.backends import main_pid
from orchestrator.service.diagnosis import explain_death
from orchestrator.service.lock import LockGuard
from orchestrator.service.readiness import STOP_SAID_S
from orchestrator.service.step import ServiceStep
from orchestrator.transport.base import Transport

_BENCH_LOCK = threading.Lock()  # one benchmark at a time: they would measure each other


@dataclass
class BenchStage:
    plan: Plan
    step: ServiceStep
    folder: RunFolder | None
    console: Console
    api_key: str | None
    base_dir: Path | None = None
    resume: bool = False
    # The target is a fleet's router (`base_url` is its URL): the replicas' processes and
    # GPUs are not on its host, so no server-side sampler, and no relaunch from here.
    through_router: bool = False
    said: list[str] = field(default_factory=list)  # the diagnosis's words, for the error

    @property
    def bench(self) -> Bench:
        assert self.plan.bench is not None
        return self.plan.bench

    def __call__(self, transport: Transport, base_url: str, outcome: HostOutcome,
                 emit: Emit, guard: LockGuard) -> str:
        host = transport.host
        out_dir = self.folder.host(host).bench.root if self.folder else Path("bench-out")
        finished = self._resumed(out_dir, host, emit)
        with contextlib.ExitStack() as forwards:  # the DCGM exporter's port, while read
            gpus = GpuSampler(transport, None) if self.through_router else \
                self._gpu_sampler(transport, forwards, base_url)
            result = self._sweep(transport, base_url, out_dir, finished, gpus, outcome, emit,
                                 guard)
        self.console.print(result.render(title=f"{self.plan.name} on {host}",
                                         width=self.console.width))
        self._say_plateau(result)
        outcome.extra["bench_dir"] = str(out_dir)
        if result.stopped == "interrupted":  # the finished levels are written: now stop
            raise Interrupted(result.signum or signal.SIGINT)
        verdict = result.verdict(self.bench.max_failed_fraction)
        if verdict is not None:
            raise BenchError(f"{host}: {verdict}; the figures are in {out_dir}")
        knee = f", knee at C={result.knee}" if result.knee else ""
        return f"{len(result.levels)} levels{knee}; results in {out_dir}"

    def _judge(self, outcome: HostOutcome) -> Judge:
        """The limits judge, with what the plan and this host's facts tell it."""
        service = self.plan.service
        assert service is not None
        host = outcome.facts.host if outcome.facts is not None else None
        gpus = len(host.gpus) if host is not None and host.gpus is not None else None
        facts = plan_facts(service.args, service.extra_args,
                           host.topology if host is not None else None, gpus,
                           flags=engine(service.engine).flags)
        return Judge(facts, dict(service.args), tuple(service.extra_args),
                     self.bench.auto.threshold)

    def _say_plateau(self, result: SweepResult) -> None:
        block = result.summary.get("plateau")
        if not isinstance(block, dict):
            return
        plan_ref = str(self.folder.layout.plan) if self.folder else f"<{self.plan.name}'s plan>"
        for line in plateau_lines(block, plan_ref):
            self.console.print(mask(line), markup=False, soft_wrap=True)

    def _resumed(self, out_dir: Path, host: str, emit: Emit) -> list[Any]:
        """The levels an earlier part of the run finished (kept); a partial one runs again."""
        if not self.resume:
            return []
        finished, partial = kept_levels(self.bench, out_dir)
        for label in partial:
            keep_apart(out_dir, label)
        if finished:
            emit(StageEvent(host, stage="bench", status="ok",
                            message="resumed: " + ", ".join(lv.spec.label for lv in finished)
                                    + " finished before, kept as they are"))
        return finished

    def _gpu_sampler(self, transport: Transport, forwards: contextlib.ExitStack,
                     base_url: str) -> Sampler:
        smi = GpuSampler(transport, self.bench.gpu_telemetry)  # asks the host once
        dcgm_port = self.bench.dcgm_port
        assert self.plan.service is not None
        stand_in = engine(self.plan.service.engine).stand_in_dcgm
        if smi.interval and not smi.available and stand_in:
            # The simulator's stand-in GPUs, on its own port (base_url already reaches it);
            # a profile without GPUs answers 404 and the host's own telemetry is read.
            url = base_url.rstrip("/") + stand_in
            if answers(url):
                return DcgmSampler(url, smi.interval)
        if smi.interval and not smi.available and dcgm_port:
            # No nvidia-smi to run: the host's DCGM exporter, if it has one, says the same.
            local = forwards.enter_context(transport.forward(dcgm_port))
            url = f"http://127.0.0.1:{local}/metrics"
            where = f"http://127.0.0.1:{dcgm_port}/metrics on {transport.host}"
            problem, nobody = not_serving(url)
            if not problem:
                return DcgmSampler(url, smi.interval, where=where)
            # Nothing on the default port is the usual host without one: not worth a word.
            if not nobody or "dcgm_port" in self.bench.model_fields_set:
                smi.reason = f"{smi.reason}; DCGM exporter at {where}: {problem}"
        return smi

    def _server_cpu(self, transport: Transport) -> list[Sampler]:
        """The server's processes' CPU time, for a real server whose processes are on this
        host: not a simulator (its CPU is not the modelled server's), not a multi-node
        server (its engine's processes run on the other nodes)."""
        service = self.plan.service
        if service is None or engine(service.engine).simulated or \
                self.step.member is not None or self.through_router:
            return []
        return [ServerCpuSampler(transport, main_pid(self.step.backend, self.step.paths))]

    def _sweep(self, transport: Transport, base_url: str, out_dir: Path, finished: list[Any],
               gpus: Sampler, outcome: HostOutcome, emit: Emit, guard: LockGuard) -> SweepResult:
        """The sweep, again from the level it cut after each relaunch the budget allows."""
        host = transport.host
        service = self.plan.service
        assert service is not None
        # An unexplained death mid-sweep is relaunched within the restart budget and the
        # sweep goes on (one server on one host; an auto search starts over, so it stops).
        budget = service.restart.max_restarts if self.step.member is None and \
            self.bench.concurrency != "auto" and not self.through_router else 0
        crash: dict[str, Any] | None = None
        relaunches = 0

        def explain(level: str | None) -> dict[str, Any]:
            if self.through_router:  # the router answered for its workers: nothing to read here
                return {"level": level, "cause": None, "relaunched": 0}
            why, cause = explain_death(transport, self.step, self.folder)
            self.said[:] = [why]
            return {"level": level, "cause": cause, "relaunched": relaunches}

        while True:
            with _BENCH_LOCK:
                result = run_sweep(
                    self.bench, base_url=base_url, model=self.step.spec.served_names[0],
                    api_key=self.api_key, out_dir=out_dir, emit=emit, host=host,
                    labels={"plan": self.plan.name, "host": host}, base_dir=self.base_dir,
                    finished=finished, crash=crash, explain_death=explain,
                    # the CPU sampler first: it holds the start until its first reading is in
                    samplers=[*self._server_cpu(transport), gpus], judge=self._judge(outcome),
                    holds=guard.holds, **self._router(outcome),
                )
            if result.stopped == "lock_lost" or result.server_died:
                self._still_ours(transport, result, out_dir, outcome, guard)
            if not result.server_died or result.crash is None:
                return result
            crash = result.crash
            if crash["cause"] is not None or relaunches >= budget:
                self._stopped_early(result, out_dir, host, outcome)
            relaunches += 1
            crash = {**crash, "relaunched": relaunches}
            finished = [level for level in result.levels if not level.partial]
            self._relaunch(transport, base_url, out_dir, crash, budget, emit, guard)

    def _router(self, outcome: HostOutcome) -> dict[str, str]:
        """Through a fleet's router: where its counters are, and its policy (the level
        records each replica as the router counted it)."""
        said = outcome.extra.get("router", {})
        if not self.through_router or self.plan.router is None or not said.get("metrics_url"):
            return {}
        return {"router_metrics": str(said["metrics_url"]), "router_policy": self.plan.router.policy}

    def _still_ours(self, transport: Transport, result: SweepResult, out_dir: Path,
                    outcome: HostOutcome, guard: LockGuard) -> None:
        """A sweep that lost its server or its locks: never relaunch a server another apply
        took over, or that `orch stop` stopped (its `--break-lock` is said a moment later)."""
        stopped = result.server_died and not self.through_router and \
            control.stopped(transport, self.step)
        taken = result.stopped == "lock_lost" or not guard.holds() or stopped
        if not taken:
            return
        self.console.print(result.render(title=f"{self.plan.name} on {transport.host}",
                                         width=self.console.width))
        outcome.extra["bench_dir"] = str(out_dir)
        guard.check("during the benchmark", STOP_SAID_S if stopped else 0.0)
        raise BenchError(f"{transport.host}: the server was stopped (orch stop) during the "
                         f"benchmark; not relaunching it; finished levels are in {out_dir}")

    def _stopped_early(self, result: SweepResult, out_dir: Path, host: str,
                       outcome: HostOutcome) -> None:
        assert result.crash is not None
        self.console.print(result.render(title=f"{self.plan.name} on {host}",
                                         width=self.console.width))
        outcome.extra["bench_dir"] = str(out_dir)
        at = f" at {result.crash['level']}" if result.crash["level"] else ""
        raise BenchError(f"{host}: the sweep stopped early{at} ({result.stopped})"
                         f"{self.said[0] if self.said else ''}; finished levels are in {out_dir}")

    def _relaunch(self, transport: Transport, base_url: str, out_dir: Path,
                  crash: dict[str, Any], budget: int, emit: Emit, guard: LockGuard) -> None:
        label = crash["level"] or "the next level"
        if crash["level"] is not None:  # its partial records kept apart, marked
            keep_apart(out_dir, crash["level"])
        emit(StageEvent(transport.host, stage="bench", status="changed",
                        message=f"the server died during {label} with no known cause; "
                                f"relaunch {crash['relaunched']}/{budget}, then {label} again "
                                "from its start"))
        control.relaunch(transport, self.step)
        control.ready(transport, self.step, self.plan, base_url=base_url, api_key=self.api_key,
                      launched=True, emit=emit,
                      still_ours=lambda wait: guard.check("during the benchmark", wait))


def keep_apart(out_dir: Path, label: str) -> None:
    """A level that runs again: its earlier, partial files become interrupted-N-* (the next
    free N), never read as the level."""
    bench = BenchLayout(out_dir)
    attempt = 1
    while any(p.exists() for p in bench.interrupted(label, attempt)):
        attempt += 1
    for old, new in zip((bench.level(label), bench.requests(label)),
                        bench.interrupted(label, attempt), strict=True):
        if old.exists():
            old.replace(new)
