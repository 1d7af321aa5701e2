"""The phases after converge, per host: ready -> smoke -> bench, then collect (always).

They run in the host's worker thread through one reach of the service (a direct URL, or an
SSH port forward), record a step outcome each, and write their artifacts into the run folder.
A failure ends the later phases of that host (collect still runs) and never the other hosts.
"""

from __future__ import annotations

import base64
import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator.errors import (
    BenchError,
    Interrupted,
    OrchError,
    ServiceError,
    SmokeFailed,
    StepError,
)
from orchestrator.events import Emit, PhaseEvent
from orchestrator.facts import Facts
from orchestrator.inventory import Inventory
from orchestrator.plan.models import Plan
from orchestrator.plan.secrets import substitute
from orchestrator.runner import HostOutcome, StepOutcome
from orchestrator.runs.layout import BenchLayout
from orchestrator.runs.records import Startup
from orchestrator.runs.writer import RunFolder
from orchestrator.server_client import ServerClient
from orchestrator.service import control
from orchestrator.service.backends import tail_command
from orchestrator.service.diagnosis import diagnose
from orchestrator.service.step import ServiceStep
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, quoted

_BENCH_LOCK = threading.Lock()  # one benchmark at a time: they would measure each other


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

    def __call__(self, transport: Transport, facts: Facts, outcome: HostOutcome, emit: Emit) -> None:
        try:
            if self.service_step is not None and "service" not in self.skip and \
                    not outcome.failed:  # a failed converge: only the logs are collected
                with control.reach(transport, self.inventory, self.plan) as base_url:
                    outcome.extra["service_url"] = base_url
                    phases: list[tuple[str, Callable[[], str]]] = [
                        ("ready", lambda: self._ready(transport, base_url, outcome, emit))]
                    if self.plan.smoke:
                        phases.append(("smoke", lambda: self._smoke(transport, base_url, outcome)))
                    if self.plan.bench:
                        phases.append(("bench", lambda: self._bench(transport, base_url, outcome, emit)))
                    for name, body in phases:
                        if outcome.failed or name in self.skip:
                            why = "--skip" if name in self.skip else "an earlier phase failed"
                            outcome.steps.append(StepOutcome(step=name, status="skipped"))
                            emit(PhaseEvent(outcome.host, phase=name, status="skipped",
                                            message=why))
                        else:
                            self._phase(outcome, emit, name, body)
        finally:
            self._phase(outcome, emit, "collect", lambda: self._collect(transport, outcome))

    # -- bookkeeping ------------------------------------------------------------------

    def _phase(self, outcome: HostOutcome, emit: Emit, name: str, body: Any) -> None:
        started = time.monotonic()
        emit(PhaseEvent(outcome.host, phase=name, status="running"))
        try:
            message = body() or ""
            step = StepOutcome(step=name, status="ok", seconds=time.monotonic() - started)
            emit(PhaseEvent(outcome.host, phase=name, status="ok",
                            message=f"{message} ({step.seconds:.1f}s)".strip()))
        except OrchError as error:
            step = StepOutcome(step=name, status="failed", seconds=time.monotonic() - started,
                               error=str(error))
            emit(PhaseEvent(outcome.host, phase=name, status="failed", message=str(error)))
        outcome.steps.append(step)


    def _startup(self, host: str, startup: Startup) -> None:
        if self.folder is not None:
            self.folder.write_startup(host, startup)

    # -- phases -----------------------------------------------------------------------

    def _ready(self, transport: Transport, base_url: str, outcome: HostOutcome, emit: Emit) -> str:
        step = self.service_step
        assert step is not None
        launched = any(s.step == "service" and s.status == "changed" for s in outcome.steps)
        try:
            done = control.ready(transport, step, self.plan, base_url=base_url,
                                 api_key=self.api_key, launched=launched, emit=emit)
        except ServiceError as error:
            if self.folder is not None:
                self.folder.write_diagnosis(outcome.host, error.diagnoses)
            raise
        if done.readiness is None:
            if not self.resume:  # resumed: startup.json keeps the start-up the run had
                self._startup(outcome.host, Startup(already_running=True, url=base_url))
            return f"{base_url} serves {done.model} (already running)"
        if self.resume:
            emit(PhaseEvent(outcome.host, phase="ready", status="changed",
                            message="the server was started again: the figures of this "
                                    "resumed run span two start-ups"))
        ready = done.readiness
        startup = Startup(seconds=round(ready.seconds, 3), restarts=ready.restarts,
                          phases=ready.phases, facts=ready.facts, url=base_url)
        self._startup(outcome.host, startup)
        outcome.extra["startup_s"] = round(ready.seconds, 3)
        took = startup.took()
        return f"{base_url} serves {done.model}" + (f"; {took}" if took else "")

    def _smoke(self, transport: Transport, base_url: str, outcome: HostOutcome) -> str:
        from orchestrator.checks import run_smoke

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
                why = "\n  the server is gone or unhealthy" + self._diagnose_death(transport, host)[0]
        if failed:
            raise SmokeFailed(f"{host}: {len(failed)} of {len(self.plan.smoke)} smoke check(s) "
                              "failed:\n  " + "\n  ".join(failed) + why)
        return f"{len(self.plan.smoke)} passed"

    def _bench(self, transport: Transport, base_url: str, outcome: HostOutcome, emit: Emit) -> str:
        from orchestrator.bench.dcgm import DcgmSampler, answers
        from orchestrator.bench.gpu_telemetry import GpuSampler
        from orchestrator.bench.samplers import Sampler
        from orchestrator.bench.sweep import kept_levels, run_sweep

        assert self.plan.bench is not None and self.service_step is not None
        host = transport.host
        out_dir = self.folder.host(host).bench.root if self.folder else Path("bench-out")
        step, service = self.service_step, self.plan.service
        assert service is not None
        # An unexplained death mid-sweep is relaunched within the restart budget and the
        # sweep goes on (one server on one host; an auto search starts over, so it stops).
        budget = service.restart.max_restarts if step.member is None and \
            self.plan.bench.concurrency != "auto" else 0
        finished: list[Any] = []
        crash: dict[str, Any] | None = None
        relaunches = 0
        if self.resume:  # the levels an earlier part finished stay; a partial one runs again
            finished, partial = kept_levels(self.plan.bench, out_dir)
            for label in partial:
                _keep_apart(out_dir, label)
            if finished:
                emit(PhaseEvent(host, phase="bench", status="ok",
                                message="resumed: " + ", ".join(lv.spec.label for lv in finished)
                                        + " finished before, kept as they are"))
        said: list[str] = []  # the diagnosis's words, for the error
        smi = GpuSampler(transport, self.plan.bench.gpu_telemetry)  # asks the host once
        gpus: Sampler = smi
        forwards = contextlib.ExitStack()
        dcgm_port = self.plan.bench.dcgm_port
        if smi.interval and not smi.available and dcgm_port:
            # No nvidia-smi to run: the host's DCGM exporter, if it has one, says the same.
            local = forwards.enter_context(transport.forward(dcgm_port))
            url = f"http://127.0.0.1:{local}/metrics"
            if answers(url):
                gpus = DcgmSampler(url, smi.interval)

        def explain(level: str | None) -> dict[str, Any]:
            why, cause = self._diagnose_death(transport, host)
            said[:] = [why]
            return {"level": level, "cause": cause, "relaunched": relaunches}

        with forwards:  # the DCGM exporter's port, while the sweep reads it
            while True:
                with _BENCH_LOCK:
                    result = run_sweep(
                        self.plan.bench, base_url=base_url, model=step.spec.served_names[0],
                        api_key=self.api_key, out_dir=out_dir, emit=emit, host=host,
                        labels={"plan": self.plan.name, "host": host}, base_dir=self.base_dir,
                        finished=finished, crash=crash, explain_death=explain, samplers=[gpus],
                    )
                if not result.server_died or result.crash is None:
                    break
                crash = result.crash
                if crash["cause"] is not None or relaunches >= budget:
                    self.console.print(result.render(title=f"{self.plan.name} on {host}",
                                                     width=self.console.width))
                    outcome.extra["bench_dir"] = str(out_dir)
                    at = f" at {crash['level']}" if crash["level"] else ""
                    raise BenchError(f"{host}: the sweep stopped early{at} ({result.stopped})"
                                     f"{said[0]}; finished levels are in {out_dir}")
                relaunches += 1
                crash = {**crash, "relaunched": relaunches}
                finished = [level for level in result.levels if not level.partial]
                label = crash["level"] or "the next level"
                if crash["level"] is not None:  # its partial records kept apart, marked
                    _keep_apart(out_dir, crash["level"])
                emit(PhaseEvent(host, phase="bench", status="changed",
                                message=f"the server died during {label} with no known cause; "
                                        f"relaunch {relaunches}/{budget}, then {label} again from "
                                        "its start"))
                control.relaunch(transport, step)
                control.ready(transport, step, self.plan, base_url=base_url, api_key=self.api_key,
                              launched=True, emit=emit)
        self.console.print(result.render(title=f"{self.plan.name} on {host}",
                                         width=self.console.width))
        outcome.extra["bench_dir"] = str(out_dir)
        if result.stopped == "interrupted":  # the finished levels are written: now stop
            raise Interrupted(result.signum or signal.SIGINT)
        verdict = result.verdict(self.plan.bench.max_failed_fraction)
        if verdict is not None:
            raise BenchError(f"{host}: {verdict}; the figures are in {out_dir}")
        knee = f", knee at C={result.knee}" if result.knee else ""
        return f"{len(result.levels)} levels{knee}; results in {out_dir}"

    def _diagnose_death(self, transport: Transport, host: str) -> tuple[str, str | None]:
        """Why the server went away mid-sweep, from its log, there and then: the words to
        show, and the known cause (None: nothing explains it, it may be relaunched)."""
        assert self.service_step is not None
        log = transport.run(tail_command(self.service_step.paths, 400), check=False).stdout
        found = diagnose(log, self.service_step.spec.engine)
        diagnoses = [d for d in found if d.level == "error"]
        if self.folder is not None and found:
            self.folder.write_diagnosis(host, [d.to_json() for d in found])
        if not diagnoses:
            hints = "".join(f"\n  seen:  {d.cause}\n  log:   {d.evidence_line}" for d in found
                            if d.key != "unknown-vllm-env")
            return ": no known cause in the service log (orch logs PLAN shows it)" + hints, None
        return "".join(f"\n  cause: {d.cause}\n  fix:   {d.fix}\n  log:   {d.evidence_line}"
                       for d in diagnoses), diagnoses[0].cause

    def _collect(self, transport: Transport, outcome: HostOutcome) -> str:
        if self.folder is None:
            return ""
        units = self.units or ([self.service_step] if self.service_step is not None else [])
        paths = [unit.paths.log for unit in units] + [item.path for item in self.plan.collect]
        found = read_files(transport, paths)  # every log and collected file: one round trip
        got, notes = 0, []
        for unit in units:
            text, _ = found[unit.paths.log]
            if text:
                self.folder.write_service_log(outcome.host, text, unit.unit)
                got += 1
        for item in self.plan.collect:
            text, why = found[item.path]
            if text is None:
                if not item.optional:
                    raise StepError(f"{outcome.host}: cannot collect {item.path}: {why}")
                if why.startswith("not a regular file"):  # a missing optional file is normal
                    notes.append(f"skipped {item.path}: {why}")
                continue
            self.folder.write_collected(outcome.host, item.path, text)
            got += 1
            if why:
                notes.append(f"kept {why} of {item.path}")
        return "; ".join([f"{got} files", *notes])


MAX_COLLECT_BYTES = 64 * 1024 * 1024  # a longer file keeps its end (a log's last part)

# `fetch PATH`: `ok|cut BASE64` for a regular file (`cut`: its last MAX_COLLECT_BYTES), `err
# BASE64` for anything else. A FIFO is never opened (it would block), nor a device read (it
# would never end): only what `test -f` calls a regular file is.
_FETCH = (
    "fetch() { "
    "if [ -f \"$1\" ]; then "
    f"if [ \"$(stat -L -c %s \"$1\")\" -gt {MAX_COLLECT_BYTES} ]; then s=cut; else s=ok; fi; "
    f"if out=$(tail -c {MAX_COLLECT_BYTES} < \"$1\" 2>/dev/null | base64 -w0) "
    "&& [ -r \"$1\" ]; then echo \"$s $out\"; "
    "else echo \"err $(cat \"$1\" 2>&1 >/dev/null | head -c 300 | base64 -w0)\"; fi; "
    "elif [ -e \"$1\" ]; then "
    "echo \"err $(echo \"not a regular file: $(stat -L -c %F \"$1\")\" | base64 -w0)\"; "
    "else echo \"err $(cat \"$1\" 2>&1 >/dev/null | head -c 300 | base64 -w0)\"; fi; }"
)


def _keep_apart(out_dir: Path, label: str) -> None:
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


def _healthy(client: ServerClient) -> bool:
    try:
        return client.health() == 200
    except OrchError:
        return False


def read_files(transport: Transport, paths: list[str]) -> dict[str, tuple[str | None, str]]:
    """path -> (its text, or None and why not), all in one command, so any content survives
    the trip. A file longer than MAX_COLLECT_BYTES comes back as its end, said in the second
    item; anything but a regular file (a FIFO, a device, a folder) comes back as None."""
    if not paths:
        return {}
    script = "; ".join([_FETCH, *(f"fetch {quoted(path)}" for path in paths)])
    lines = transport.run(Command.script(script), check=False).stdout.splitlines()
    out: dict[str, tuple[str | None, str]] = {}
    for path, line in zip(paths, lines + [""] * (len(paths) - len(lines)), strict=True):
        status, _, data = line.partition(" ")
        text = base64.b64decode(data).decode("utf-8", "replace")
        if status == "ok":
            out[path] = (text, "")
        elif status == "cut":
            out[path] = (text, f"its last {MAX_COLLECT_BYTES // 2**20} MiB")
        else:
            out[path] = (None, text.strip() or "no answer")
    return out
