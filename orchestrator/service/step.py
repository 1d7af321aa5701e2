"""The service step: the model server runs the launch spec of the plan, and was started after
the last change of anything it depends on.

Restart only when needed: the host keeps, in `spec.json`, the fingerprint the running server
was started with (launch spec hash, environment file digest, installed packages, config
files, and for the simulator the orch build). A different fingerprint, or a dead process,
is a change; anything else is converged. Preflight findings that would make the launch fail
block the step before anything is started.

`OrchWheelStep` makes `orch sim serve` available on the host for `engine: sim`: the
controller's own orch, uploaded as a wheel and installed into the plan's venv, both checked
by digest.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from orchestrator.engines import engine
from orchestrator.facts import Facts, HostFacts, OtherInstance, ProbeRequest, ServiceFacts
from orchestrator.packages import Installer
from orchestrator.plan.models import Plan, PythonEnv, ServiceSpec
from orchestrator.runs.records import Startup
from orchestrator.selfwheel import self_wheel, self_wheel_digest
from orchestrator.service import spec_diff
from orchestrator.service.backends import (
    RAY_UNIT,
    Backend,
    ServicePaths,
    describe_survivors,
    start_command,
    stop_command,
)
from orchestrator.service.launch import LaunchSpec, render_env_file, spec_hash
from orchestrator.service.preflight import preflight
from orchestrator.service.systemd import render_unit
from orchestrator.steps.base import Change, Finding, Step, StepPlan, Upload
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command


class GroupDecision(Protocol):
    """What the nodes of a multi-node server decided together (cluster/gate.py)."""

    @property
    def restart(self) -> bool: ...

    @property
    def blocked(self) -> str | None: ...

    def why(self) -> str: ...


class GroupMember(Protocol):
    """A service's part in a multi-node server (cluster/member.py): it votes, and its
    stop and start keep the group's order through hooks run around the start."""

    also_stop: list[Command]

    def decide(self, reason: str | None, facts: Facts) -> GroupDecision: ...

    def stopped(self) -> Callable[[Transport], None]: ...

    def started(self) -> Callable[[Transport], None]: ...

    def before_start(self, decision: GroupDecision) -> Callable[[Transport], None]: ...

# Fingerprint parts as `orch plan` names them.
_PART_NAMES = {"backend": "backend", "launch_spec": "command line", "environment": "environment",
               "packages": "packages", "config_files": "config files", "orch_build": "orch build"}


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def choose_backend(configured: str, host: HostFacts) -> Backend:
    """`auto` picks systemd where the host runs it and we may write units (root)."""
    if configured == "systemd":
        return "systemd"
    if configured == "process":
        return "process"
    return "systemd" if host.systemd and host.is_root else "process"


def service_request(paths: ServicePaths, service: ServiceSpec, lock: str | None = None,
                    *, port: bool = True) -> dict[str, Any]:
    """What the probe must look at for the service (the service step and `orch status`);
    `port`: who listens on the service's port (not for a Ray node)."""
    request: dict[str, Any] = {
        "pidfile": paths.pidfile,
        "spec_file": paths.spec_file,
        "startup_file": paths.startup_file,
        "restart_file": paths.restart_marker,
        "env_file": paths.env_file,
        "state_dir": paths.state_dir,
        "registry": paths.registry_entry,
    }
    if port:
        request["port"] = service.port
    if service.backend in ("auto", "systemd"):
        request["unit"] = paths.unit
        request["unit_file"] = paths.unit_file
    if lock is not None:
        request["lock"] = lock
    return request


@dataclass(frozen=True)
class ServiceRecord:
    """The service's `spec.json` on the host: what the running server was started with
    (argv, environment without secret values, config file digests: what `orch plan` diffs)."""

    fingerprint: dict[str, str]
    backend: Backend | None
    command: str = ""
    port: int | None = None
    served_names: tuple[str, ...] = ()
    written: float = 0.0
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    secrets: str = ""  # digest of the secret variables' values: "a secret changed", not which value

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "served_names": list(self.served_names),
                           "argv": list(self.argv)}, indent=2) + "\n"


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def host_record(facts: Facts) -> ServiceRecord | None:
    """The record the last start left on the host (None: none, or unreadable)."""
    return record_of(facts.service)


def record_of(found: ServiceFacts | OtherInstance | None) -> ServiceRecord | None:
    text = found.spec_text if found is not None else None
    try:
        data = json.loads(text or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    backend = data.get("backend")
    argv = data.get("argv")
    return ServiceRecord(
        fingerprint=_strings(data.get("fingerprint")),
        backend=backend if backend in ("systemd", "process") else None,
        command=str(data.get("command") or ""),
        port=data.get("port") if isinstance(data.get("port"), int) else None,
        served_names=tuple(str(n) for n in data.get("served_names") or ()),
        written=float(data.get("written") or 0.0),
        argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
        env=_strings(data.get("env")),
        files=_strings(data.get("files")),
        secrets=str(data.get("secrets") or ""),
    )


def last_startup(found: ServiceFacts | None) -> Startup | None:
    """How the running server's last start-up went (the startup.json beside it, written when
    it became ready); None when orch did not start it, or an older orch wrote another form."""
    text = found.startup_text if found is not None else None
    try:
        return Startup.model_validate_json(text or "")
    except ValidationError:
        return None


def last_startup_s(found: ServiceFacts | None) -> float | None:
    """Seconds the last start-up took."""
    startup = last_startup(found)
    return startup.seconds if startup is not None else None


def last_kernels(found: ServiceFacts | None) -> dict[str, Any]:
    """The kernels the running server's start-up chose (engines/vllm_kernels.py); empty when
    its start-up said nothing of them or orch did not start it."""
    startup = last_startup(found)
    kernels = startup.facts.get("kernels") if startup is not None else None
    return kernels if isinstance(kernels, dict) else {}


class OrchWheelStep(Step):
    name = "orch"

    def __init__(self, python: PythonEnv) -> None:
        self.python = python
        self.filename, self.data = self_wheel()
        self.digest = self_wheel_digest()
        self.wheel_path = f"{python.venv}/.orch/{self.filename}"
        self.marker = f"{python.venv}/.orch/installed-wheel.sha256"

    def request(self) -> ProbeRequest:
        return ProbeRequest(files={self.wheel_path: self.digest, self.marker: _sha(self.digest + "\n")})

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        wheel = facts.files.get(self.wheel_path)
        marker = facts.files.get(self.marker)
        installed = marker is not None and marker.exists and marker.sha256 == _sha(self.digest + "\n")
        uploaded = wheel is not None and wheel.exists and wheel.sha256 == self.digest
        if installed and uploaded:
            return result
        # The simulator needs nothing beyond the standard library: no index is asked.
        install = Installer.of(self.python).install([self.wheel_path], reinstall=True)
        result.changes.append(
            Change(
                f"install orch {self.digest[:12]} into the venv (for orch sim serve)",
                commands=[install],
                uploads=[Upload(self.wheel_path, self.data, 0o644),
                         Upload(self.marker, (self.digest + "\n").encode(), 0o644)],
            )
        )
        return result


class ServiceStep(Step):
    """The model server on this host; also a Ray node of a multi-node server (`unit`), and
    a member of a group (`member`: it votes with the other nodes and keeps their order)."""

    name = "service"
    verify = False  # liveness after a start is readiness's job, with diagnosis
    follows_earlier_changes = True  # packages or config changed by earlier steps restart it

    def __init__(
        self,
        plan: Plan,
        spec: LaunchSpec,
        secrets: Mapping[str, str],
        *,
        file_digests: Mapping[str, str],
        force_restart: bool = False,
        unit: str | None = None,
        member: GroupMember | None = None,
        checks_server: bool = False,
    ) -> None:
        assert plan.service is not None and plan.python is not None
        self.plan_ = plan
        # A process started before the server on its host (the head's Ray node) checks the
        # server's preflight too: nothing is started that the server's launch would strand.
        self.checks_server = checks_server
        self.service = plan.service
        self.spec = spec
        self.unit = unit  # None: the service itself; else a process beside it ("ray")
        if unit is not None:
            self.name = unit
        self.member = member
        self.paths = ServicePaths.for_venv(
            plan.python.venv, self.service.name if unit is None else f"{self.service.name}-{unit}")
        self.env_text = render_env_file(spec, secrets)
        self.secrets_digest = _sha("\n".join(
            line for line in self.env_text.splitlines()
            if line.partition("=")[0] in spec.secret_env_names))
        self.file_digests = dict(file_digests)
        self.force_restart = force_restart
        self.backend: Backend = "process"

    def request(self) -> ProbeRequest:
        if self.unit is not None:
            server = service_request(ServicePaths.for_venv(self.plan_.python.venv if
                                                           self.plan_.python else "/",
                                                           self.service.name), self.service) \
                if self.checks_server else None
            return ProbeRequest(units={self.unit: service_request(self.paths, self.service, port=False)},
                                service=server)
        return ProbeRequest(service=service_request(self.paths, self.service),
                            vllm=engine(self.service.engine).reads_vllm)

    def found(self, facts: Facts) -> ServiceFacts | None:
        return facts.units.get(self.unit) if self.unit is not None else facts.service

    def fingerprint(self, facts: Facts) -> dict[str, str]:
        freeze = facts.venv.freeze() if facts.venv is not None else ""
        parts = {
            "backend": self.backend,
            "launch_spec": spec_hash(self.spec),
            "environment": _sha(self.env_text),
            "packages": _sha(freeze),
            "config_files": _sha(json.dumps(sorted(self.file_digests.items()))),
        }
        if engine(self.service.engine).simulated:  # it runs from the orch wheel
            parts["orch_build"] = self_wheel_digest()
        return parts

    def unit_text(self) -> str:
        return render_unit(self.spec, name=self.paths.name, env_file=self.paths.env_file,
                           log_path=self.paths.log)

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        self.backend = choose_backend(self.service.backend, facts.host)
        found = self.found(facts)
        alive = found is not None and found.process is not None
        errors: list[Finding] = []
        if self.unit is None or self.checks_server:
            findings = preflight(self.plan_, facts)
            result.findings.extend(findings)
            errors = [f for f in findings if f.level == "error"]
            if errors and not alive:
                result.blocked = f"preflight: the launch would fail ({len(errors)} problem(s) below)"
        wanted = self.fingerprint(facts)
        on_host = record_of(found)
        stored = on_host.fingerprint if on_host is not None else {}
        recorded_backend = (on_host.backend if on_host is not None else None) or self.backend
        uploads = [Upload(self.paths.env_file, self.env_text.encode(), 0o600)]
        if self.backend == "systemd":
            uploads.append(Upload(self.paths.unit_file, self.unit_text().encode(), 0o644))
        record = ServiceRecord(fingerprint=wanted, backend=self.backend, command=self.spec.display(),
                               port=self.spec.port, served_names=tuple(self.spec.served_names),
                               written=time.time(), argv=tuple(self.spec.argv),
                               env=self.spec.public_env(), files=dict(sorted(self.file_digests.items())),
                               secrets=self.secrets_digest)
        uploads.append(Upload(self.paths.spec_file, record.to_json().encode(), 0o644))
        reason: str | None = None
        other = found.other if found is not None and self.unit is None else None
        replaced = False
        if other is not None and other.process is not None:
            if other_port(other) in (None, self.spec.port):  # the same service, another venv
                replaced = True
                reason = f"replaces the one started from {_venv_of(other.state_dir)}"
            else:  # two servers of one name on two ports: both may be meant
                result.findings.append(Finding(
                    "warning", f"another {self.paths.name} runs from {_venv_of(other.state_dir)} "
                    f"on port {other_port(other)}; it is left running",
                    "give one of them another service.name, or stop it (orch stop)"))
        if replaced:
            pass  # the reason is said above
        elif not alive:
            reason = "not running"
            if found is not None and found.survivors:  # the stop below ends them first
                reason += f"; {describe_survivors(found.survivors)}, stopped first"
        elif stored != wanted:
            changed = [_PART_NAMES.get(k, k) for k in wanted if stored.get(k) != wanted[k]]
            reason = "changed: " + (", ".join(changed) or "unknown")
        elif self.force_restart:
            reason = "restart requested"
        elif found is not None and found.restart_requested:
            reason = "a command asked for a restart"
        stops: list[Command] = []
        if replaced and other is not None:
            before = record_of(other)
            old_backend = (before.backend if before else None) or "process"
            stops.append(stop_command(old_backend, ServicePaths(self.paths.name, other.state_dir),
                                      engine=self.spec.engine))
            # A multi-node plan's server had a Ray node beside it in its venv: it goes too
            # (else it outlives the replace, unseen by the new plan's status and stop).
            ray = ServicePaths.for_venv(_venv_of(other.state_dir), f"{self.paths.name}-{RAY_UNIT}")
            stops.append(stop_command(old_backend, ray, engine="ray", only_if_present=True))
        if recorded_backend != self.backend:
            # Moving between backends: stop what the old one started.
            stops.append(stop_command(recorded_backend, self.paths, engine=self.spec.engine))
        stops.append(stop_command(self.backend, self.paths, engine=self.spec.engine))
        start = start_command(self.backend, self.spec, self.paths)
        if self.member is not None:
            decision = self.member.decide(reason, facts)
            if decision.blocked is not None:
                result.blocked = f"the group cannot start: {decision.blocked}"
                return result
            if reason is None and decision.restart:
                reason = f"the group restarts: {decision.why()}"
            if reason is None:
                return result
            member = self.member
            stop_all = [*member.also_stop, *stops] if decision.restart else stops

            def stop_then_wait(transport: Transport) -> None:
                # Stopping is part of the order: the others wait for it, then for the head.
                script = stop_all[0]
                for command in stop_all[1:]:
                    script = script.then(command)
                transport.run(script, timeout=180)
                member.stopped()(transport)
                member.before_start(decision)(transport)

            verb = "start" if not alive else "restart"
            result.changes.append(Change(
                f"{verb} {self.paths.name} ({self.backend}; {reason})", commands=[start],
                uploads=uploads, before=stop_then_wait, after=member.started()))
            return result
        if reason is None:
            return result
        if errors:  # a restart would launch what preflight says fails: keep the running one
            result.blocked = (f"preflight: the restart would fail ({len(errors)} problem(s) "
                              "below); the running server is left as it is")
            return result
        verb = "replace" if replaced else "start" if not alive else "restart"
        diff = ""
        previous = record_of(other) if replaced else on_host if alive else None
        if previous is not None and (replaced or stored != wanted):
            diff = "\n".join(restart_diff(previous, record, self.spec.secret_env_names))
            result.findings.append(restart_cost(self.paths.name, last_startup_s(found)))
        result.changes.append(
            Change(f"{verb} {self.paths.name} ({self.backend}; {reason})", commands=[*stops, start],
                   uploads=uploads, diff=diff)
        )
        return result


def other_port(other: OtherInstance) -> int | None:
    """The port the service of the same name from another venv was started on."""
    record = record_of(other)
    return record.port if record is not None else None


def _venv_of(state_dir: str) -> str:
    """The venv a service's state folder belongs to (<venv>/.orch/service/<name>)."""
    head, marker, _ = state_dir.rpartition("/.orch/service/")
    return head if marker else state_dir


def restart_diff(before: ServiceRecord, after: ServiceRecord, secret_names: frozenset[str]) -> list[str]:
    """What the restart changes, one `+`/`-`/`~` line each (spec_diff.py)."""
    if not before.argv:  # a record from an orch that kept no argv: say which parts changed
        return [f"~ {key}" for key in sorted(after.fingerprint)
                if before.fingerprint.get(key) != after.fingerprint[key]]
    lines = spec_diff.argv_changes(before.argv, after.argv)
    lines += spec_diff.env_changes(before.env, after.env, secret_names)
    lines += spec_diff.files_changes(before.files, after.files)
    changed = {k for k in after.fingerprint if before.fingerprint.get(k) != after.fingerprint[k]}
    if before.secrets != after.secrets and secret_names:
        lines.append(f"~ env {', '.join(sorted(secret_names))}: a secret's value changed "
                     "(values are not shown)")
    if "packages" in changed:
        lines.append("~ installed packages (the python step lists them)")
    if "orch_build" in changed:
        lines.append(f"~ orch build {before.fingerprint.get('orch_build', '?')[:12]} -> "
                     f"{after.fingerprint['orch_build'][:12]}")
    if "backend" in changed:
        lines.append(f"~ backend: {before.backend} -> {after.backend}")
    return lines


def restart_cost(name: str, seconds: float | None) -> Finding:
    took = f"the last one took {spec_diff.duration(seconds)}" if seconds else \
        "weights and torch.compile: minutes for a large model"
    return Finding("warning", f"applying restarts {name}: a full start-up ({took}), "
                              "during which it serves nothing")
