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

import contextlib
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from orchestrator.packages import Installer
from orchestrator.plan.models import Plan, PythonEnv, ServiceSpec
from orchestrator.probe import Facts, ProbeRequest
from orchestrator.selfwheel import self_wheel, self_wheel_digest
from orchestrator.service.backends import Backend, ServicePaths, start_command, stop_command
from orchestrator.service.launch import LaunchSpec, render_env_file, spec_hash
from orchestrator.service.preflight import preflight
from orchestrator.service.systemd import render_unit
from orchestrator.steps.base import Change, Step, StepPlan, Upload
from orchestrator.transport.command import Command


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def choose_backend(configured: str, host_facts: Mapping[str, Any]) -> Backend:
    """`auto` picks systemd where the host runs it and we may write units (root)."""
    if configured == "systemd":
        return "systemd"
    if configured == "process":
        return "process"
    root = str(host_facts.get("user")) in ("root", "0")
    return "systemd" if host_facts.get("systemd") and root else "process"


def service_request(paths: ServicePaths, service: ServiceSpec) -> dict[str, Any]:
    """What the probe must look at for the service (the service step and `orch status`)."""
    request: dict[str, Any] = {
        "pidfile": paths.pidfile,
        "spec_file": paths.spec_file,
        "env_file": paths.env_file,
        "port": service.port,
    }
    if service.backend in ("auto", "systemd"):
        request["unit"] = paths.unit
        request["unit_file"] = paths.unit_file
    return request


def host_record(facts: Facts) -> dict[str, Any]:
    """The service's `spec.json` on the host: what the running server was started with."""
    with contextlib.suppress(json.JSONDecodeError, AttributeError, TypeError):
        record = json.loads((facts.service or {}).get("spec") or "{}")
        if isinstance(record, dict):
            return record
    return {}


def recorded_backend_of(facts: Facts) -> Backend | None:
    backend = host_record(facts).get("backend")
    return "systemd" if backend == "systemd" else "process" if backend == "process" else None


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
    ) -> None:
        assert plan.service is not None and plan.python is not None
        self.plan_ = plan
        self.service = plan.service
        self.spec = spec
        self.paths = ServicePaths.for_venv(plan.python.venv, self.service.name)
        self.env_text = render_env_file(spec, secrets)
        self.file_digests = dict(file_digests)
        self.force_restart = force_restart
        self.backend: Backend = "process"

    def request(self) -> ProbeRequest:
        return ProbeRequest(service=service_request(self.paths, self.service),
                            vllm=self.service.engine == "vllm")

    def fingerprint(self, facts: Facts) -> dict[str, str]:
        freeze = facts.venv.freeze() if facts.venv is not None else ""
        parts = {
            "backend": self.backend,
            "launch_spec": spec_hash(self.spec),
            "environment": _sha(self.env_text),
            "packages": _sha(freeze),
            "config_files": _sha(json.dumps(sorted(self.file_digests.items()))),
        }
        if self.service.engine == "sim":
            parts["orch_build"] = self_wheel_digest()
        return parts

    def unit_text(self) -> str:
        return render_unit(self.spec, name=self.paths.name, env_file=self.paths.env_file,
                           log_path=self.paths.log)

    def preflight_facts(self, facts: Facts) -> dict[str, Any]:
        service = facts.service or {}
        port = service.get("port") or {}
        holder = port.get("holder")
        ports = {}
        if port.get("listening"):
            ports[self.service.port] = {
                "pid": (holder or {}).get("pid"), "cmdline": (holder or {}).get("cmdline"),
            }
        out: dict[str, Any] = {"ports": ports, "gpus": facts.host.get("gpus"),
                               "service_pid": service.get("pid")}
        if facts.venv is not None:
            out["installed"] = {k: d.version for k, d in facts.venv.distributions.items()}
        if facts.vllm is not None:
            out["vllm"] = facts.vllm
        return out

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        self.backend = choose_backend(self.service.backend, facts.host)
        service = facts.service or {}
        findings = preflight(self.plan_, self.preflight_facts(facts))
        result.findings.extend(findings)
        errors = [f for f in findings if f.level == "error"]
        alive = service.get("process") is not None
        if errors and not alive:
            result.blocked = f"preflight: the launch would fail ({len(errors)} problem(s) below)"
        wanted = self.fingerprint(facts)
        on_host = host_record(facts)
        stored: dict[str, str] = on_host.get("fingerprint") or {}
        recorded_backend = recorded_backend_of(facts) or self.backend
        uploads = [Upload(self.paths.env_file, self.env_text.encode(), 0o600)]
        commands: list[Command] = []
        if self.backend == "systemd":
            uploads.append(Upload(self.paths.unit_file, self.unit_text().encode(), 0o644))
        record = {
            "fingerprint": wanted,
            "backend": self.backend,
            "command": self.spec.display(),
            "port": self.service.port,
            "served_names": self.spec.served_names,
            "written": time.time(),
        }
        uploads.append(Upload(self.paths.spec_file, (json.dumps(record, indent=2) + "\n").encode(), 0o644))
        if not alive:
            reason = "not running"
        elif stored != wanted:
            changed = sorted(k for k in wanted if stored.get(k) != wanted[k]) or ["unknown"]
            reason = "changed: " + ", ".join(changed)
        elif self.force_restart:
            reason = "restart requested"
        else:
            return result
        if recorded_backend != self.backend:
            # Moving between backends: stop what the old one started.
            commands.append(stop_command(recorded_backend, self.paths))
        commands.append(stop_command(self.backend, self.paths))
        commands.append(start_command(self.backend, self.spec, self.paths))
        verb = "start" if not alive else "restart"
        result.changes.append(
            Change(f"{verb} {self.paths.name} ({self.backend}; {reason})", commands=commands,
                   uploads=uploads)
        )
        return result
