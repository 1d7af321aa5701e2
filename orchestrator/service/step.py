"""The service step: the model server runs the launch spec of the plan, and was started after
the last change of anything it depends on.

Restart only when needed: the host keeps, in `spec.json`, the fingerprint the running server
was started with (launch spec hash, environment file digest, installed packages, config
files, and for the simulator the orch build). A different fingerprint, or a dead process,
is a change; anything else is converged. Preflight findings that would make the launch fail
block the step before anything is started.

What the host keeps of the running server is host_state.py's; `orch sim serve`'s wheel is
orch_wheel.py's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from orchestrator.engines import engine
from orchestrator.facts import Facts, HostFacts, OtherInstance, ProbeRequest, ServiceFacts
from orchestrator.facts.compile_cache import compile_cache_of
from orchestrator.plan.models import Plan, ServiceSpec
from orchestrator.selfwheel import self_wheel_digest
from orchestrator.service.backends import (
    RAY_UNIT,
    Backend,
    ServicePaths,
    describe_survivors,
    start_command,
    stop_command,
)
from orchestrator.service.host_state import (
    ServiceRecord,
    last_startup_s,
    other_port,
    record_of,
    restart_cost,
    restart_diff,
    venv_of,
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


def registry_note(paths: ServicePaths, found: ServiceFacts) -> str:
    """What is wrong with the host's registry entry of the service, as status and plan say it."""
    return (f"the host's registry entry {paths.registry_entry} (the folders {paths.name} was "
            f"started from) {found.registry_problem}: orch ignored what it could not use")


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
        cache = engine(self.service.engine).compile_cache
        # The compile cache the launch uses, and whether it was filled when a start was
        # planned (read by readiness: a warm or cold start); none for a Ray node.
        self.compile_cache = {"root": spec.env[cache.env], "subdir": cache.subdir} \
            if cache is not None and unit is None and cache.env in spec.env else None
        self.cache_before: bool | None = None

    def request(self) -> ProbeRequest:
        if self.unit is not None:
            server = service_request(ServicePaths.for_venv(self.plan_.python.venv if
                                                           self.plan_.python else "/",
                                                           self.service.name), self.service) \
                if self.checks_server else None
            return ProbeRequest(units={self.unit: service_request(self.paths, self.service, port=False)},
                                service=server)
        asks = {"compile_cache": self.compile_cache} if self.compile_cache else {}
        return ProbeRequest(service=service_request(self.paths, self.service),
                            engine_builds=engine(self.service.engine).builds, asks=asks)

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
        errors = self._preflight(facts, result, alive)
        wanted = self.fingerprint(facts)
        on_host = record_of(found)
        record = self._record(wanted)
        other = found.other if found is not None and self.unit is None else None
        if found is not None and found.registry_problem and self.unit is None:
            if not found.registry_problem.startswith(("is a symlink", "holds ")):
                # a start could not record itself there: fail before stopping anything
                result.blocked = (f"{registry_note(self.paths, found)}; a start could not record "
                                  "itself there: remove what stands there, or make it readable "
                                  "and writable for the user orch logs in as, on the host")
                return result
            result.findings.append(Finding("warning", registry_note(self.paths, found),
                                           "the next start of the service rewrites it"))
        replaced = self._replaces(other, result)
        reason = self._reason(found, alive, replaced, other, on_host, wanted)
        stops = self._stops(on_host, other if replaced else None)
        if self.member is not None:
            return self._group_start(facts, result, reason, alive, stops, record)
        if reason is None:
            return result
        if errors:  # a restart would launch what preflight says fails: keep the running one
            if alive:  # (not running: _preflight said the launch would fail)
                result.blocked = (f"preflight: the restart would fail ({len(errors)} problem(s) "
                                  "below); the running server is left as it is")
            return result
        verb = "replace" if replaced else "start" if not alive else "restart"
        diff = ""
        stored = on_host.fingerprint if on_host is not None else {}
        previous = record_of(other) if replaced else on_host if alive else None
        if previous is not None and (replaced or stored != wanted):
            diff = "\n".join(restart_diff(previous, record, self.spec.secret_env_names))
            result.findings.append(restart_cost(self.paths.name, last_startup_s(found)))
        start = start_command(self.backend, self.spec, self.paths)
        cache = compile_cache_of(facts)
        self.cache_before = cache.filled if cache is not None else None
        result.changes.append(
            Change(f"{verb} {self.paths.name} ({self.backend}; {reason})", commands=[*stops, start],
                   uploads=self._uploads(record), diff=diff)
        )
        return result

    def _preflight(self, facts: Facts, result: StepPlan, alive: bool) -> list[Finding]:
        """The launch's problems, found before it: errors block a start (a running server is
        kept rather than restarted into them)."""
        if self.unit is not None and not self.checks_server:
            return []
        findings = preflight(self.plan_, facts)
        result.findings.extend(findings)
        errors = [f for f in findings if f.level == "error"]
        if errors and not alive:
            result.blocked = f"preflight: the launch would fail ({len(errors)} problem(s) below)"
        return errors

    def _record(self, wanted: dict[str, str]) -> ServiceRecord:
        """The spec.json a start now would leave on the host."""
        return ServiceRecord(fingerprint=wanted, backend=self.backend, command=self.spec.display(),
                             port=self.spec.port, served_names=tuple(self.spec.served_names),
                             written=time.time(), argv=tuple(self.spec.argv),
                             env=self.spec.public_env(),
                             files=dict(sorted(self.file_digests.items())),
                             secrets=self.secrets_digest)

    def _uploads(self, record: ServiceRecord) -> list[Upload]:
        uploads = [Upload(self.paths.env_file, self.env_text.encode(), 0o600)]
        if self.backend == "systemd":
            uploads.append(Upload(self.paths.unit_file, self.unit_text().encode(), 0o644))
        uploads.append(Upload(self.paths.spec_file, record.to_json().encode(), 0o644))
        return uploads

    def _replaces(self, other: OtherInstance | None, result: StepPlan) -> bool:
        """Whether a running server of this name from another venv is the one to replace: on
        this port, yes; on another, both may be meant (a warning)."""
        if other is None or other.process is None:
            return False
        if other_port(other) in (None, self.spec.port):
            return True
        result.findings.append(Finding(
            "warning", f"another {self.paths.name} runs from {venv_of(other.state_dir)} "
            f"on port {other_port(other)}; it is left running",
            "give one of them another service.name, or stop it (orch stop)"))
        return False

    def _reason(self, found: ServiceFacts | None, alive: bool, replaced: bool,
                other: OtherInstance | None, on_host: ServiceRecord | None,
                wanted: dict[str, str]) -> str | None:
        """Why it must (re)start, or None: converged."""
        stored = on_host.fingerprint if on_host is not None else {}
        if replaced and other is not None:
            return f"replaces the one started from {venv_of(other.state_dir)}"
        if not alive:
            reason = "not running"
            if found is not None and found.survivors:  # the stop below ends them first
                reason += f"; {describe_survivors(found.survivors)}, stopped first"
            return reason
        if stored != wanted:
            changed = [_PART_NAMES.get(k, k) for k in wanted if stored.get(k) != wanted[k]]
            return "changed: " + (", ".join(changed) or "unknown")
        if self.force_restart:
            return "restart requested"
        if found is not None and found.restart_requested:
            return "a command asked for a restart"
        return None

    def _stops(self, on_host: ServiceRecord | None, replaced: OtherInstance | None) -> list[Command]:
        """What to stop before the start: the replaced server (and its Ray node), what an
        earlier backend started, and this one."""
        stops: list[Command] = []
        if replaced is not None:
            before = record_of(replaced)
            old_backend = (before.backend if before else None) or "process"
            stops.append(stop_command(old_backend, ServicePaths(self.paths.name, replaced.state_dir),
                                      engine=self.spec.engine))
            # A multi-node plan's server had a Ray node beside it in its venv: it goes too
            # (else it outlives the replace, unseen by the new plan's status and stop).
            ray = ServicePaths.for_venv(venv_of(replaced.state_dir), f"{self.paths.name}-{RAY_UNIT}")
            stops.append(stop_command(old_backend, ray, engine="ray", only_if_present=True))
        recorded_backend = (on_host.backend if on_host is not None else None) or self.backend
        if recorded_backend != self.backend:
            # Moving between backends: stop what the old one started.
            stops.append(stop_command(recorded_backend, self.paths, engine=self.spec.engine))
        stops.append(stop_command(self.backend, self.paths, engine=self.spec.engine))
        return stops

    def _group_start(self, facts: Facts, result: StepPlan, reason: str | None, alive: bool,
                     stops: list[Command], record: ServiceRecord) -> StepPlan:
        """A member of a multi-node server starts when the group decides, in its order."""
        assert self.member is not None
        member = self.member
        decision = member.decide(reason, facts)
        if decision.blocked is not None:
            result.blocked = f"the group cannot start: {decision.blocked}"
            return result
        if reason is None and decision.restart:
            reason = f"the group restarts: {decision.why()}"
        if reason is None:
            return result
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
        cache = compile_cache_of(facts)
        self.cache_before = cache.filled if cache is not None else None
        result.changes.append(Change(
            f"{verb} {self.paths.name} ({self.backend}; {reason})",
            commands=[start_command(self.backend, self.spec, self.paths)],
            uploads=self._uploads(record), before=stop_then_wait, after=member.started()))
        return result
