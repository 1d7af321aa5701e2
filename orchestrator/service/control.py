"""Looking after a service on one host: reach it, wait until it is ready (relaunching an
unexplained death), read its state, its log, stop it.

The step (`service/step.py`) decides whether to start or restart; everything after that is
here, for `orch apply`'s ready phase and for `orch status|logs|stop` alike. Each function
takes a live transport and the plan; nothing here prints.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator.events import Emit
from orchestrator.inventory import Inventory
from orchestrator.lock import Holder, lock_path
from orchestrator.packages import pin_drift
from orchestrator.plan.models import Plan
from orchestrator.probe import Facts, ProbeRequest, Process, probe
from orchestrator.server_client import ServerClient
from orchestrator.service.backends import (
    Backend,
    ServicePaths,
    start_command,
    stop_command,
    tail_command,
    watch_command,
)
from orchestrator.service.readiness import Readiness, parse_watch, wait_ready
from orchestrator.service.step import (
    ServiceStep,
    choose_backend,
    recorded_backend_of,
    service_request,
)
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, Raw

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@contextlib.contextmanager
def reach(transport: Transport, inventory: Inventory, plan: Plan) -> Iterator[str]:
    """The base URL of the host's service as seen from here: direct for this machine or an
    exposed port, an SSH port forward for `bench.via: ssh` or a loopback-only service."""
    from orchestrator.bench.reach import bench_url

    assert plan.service is not None
    spec = inventory.hosts.get(transport.host)
    via_ssh = plan.bench is not None and plan.bench.via == "ssh"
    if spec is not None and spec.connection == "local":
        address, via = "127.0.0.1", "direct"
    elif via_ssh or plan.service.host in _LOOPBACK:
        address, via = "127.0.0.1", "ssh"
    else:
        address, via = (spec.address if spec and spec.address else transport.host), "direct"
    with bench_url(address, plan.service.port, via=via, transport=transport) as url:  # type: ignore[arg-type]
        yield url


# -- start-up ---------------------------------------------------------------------------


@dataclass
class Ready:
    """How the service became ready (or that it already was)."""

    url: str
    model: str
    already_running: bool = False
    readiness: Readiness | None = None


def relaunch(transport: Transport, step: ServiceStep) -> None:
    """Stop first (leftover workers hold GPU memory and the port), then start."""
    transport.run(stop_command(step.backend, step.paths).then(
        start_command(step.backend, step.spec, step.paths)), timeout=120)


def ready(
    transport: Transport, step: ServiceStep, plan: Plan, *, base_url: str,
    api_key: str | None, launched: bool, emit: Emit,
) -> Ready:
    """Wait for the service the step started (phases, diagnosis, relaunch within the
    restart budget); an unchanged running service gets one readiness check, no log replay."""
    assert plan.service is not None
    model = step.spec.served_names[0]
    if not launched:
        with ServerClient(base_url, api_key=api_key, timeout=plan.health.request_timeout) as client:
            ok, _ = client.ready(model)
        if ok:
            return Ready(base_url, model, already_running=True)
    readiness = wait_ready(
        transport, backend=step.backend, paths=step.paths, health=plan.health,
        base_url=base_url, model=model, api_key=api_key,
        relaunch=lambda: relaunch(transport, step),
        max_restarts=plan.service.restart.max_restarts, emit=emit,
    )
    # Kept on the host, so the next `orch plan` can say what a restart would cost.
    took = {"seconds": round(readiness.seconds, 1),
            "phases": {p["phase"]: p["duration_s"] for p in readiness.phases if p.get("duration_s")}}
    transport.put(json.dumps(took).encode(), step.paths.startup_file)
    return Ready(base_url, model, readiness=readiness)


# -- what runs, as `orch status|logs|stop` see it --------------------------------------------


@dataclass
class ServiceHandle:
    """The service of `plan` on one host, as one probe found it. The backend is the one the
    running service was started with, else what the plan chooses."""

    transport: Transport
    plan: Plan
    paths: ServicePaths
    backend: Backend
    facts: Facts

    @classmethod
    def look(cls, transport: Transport, plan: Plan) -> ServiceHandle:
        assert plan.service is not None and plan.python is not None
        paths = ServicePaths.for_venv(plan.python.venv, plan.service.name)
        lock = lock_path(plan.python.venv, plan.name, transport.host)
        facts = probe(transport, ProbeRequest(venv=plan.python.venv,
                                              service=service_request(paths, plan.service, lock)))
        backend = recorded_backend_of(facts) or choose_backend(plan.service.backend, facts.host)
        return cls(transport, plan, paths, backend, facts)

    @property
    def process(self) -> Process | None:
        return self.facts.service.process if self.facts.service is not None else None


@dataclass
class ServiceStatus:
    host: str
    backend: str
    state: str = "stopped"  # running, dead (a pidfile but no process), stopped
    pid: int | None = None
    uptime_s: int | None = None
    health: str = "-"  # the /health status code, or why it could not be asked
    served: list[str] = field(default_factory=list)
    vllm_version: str | None = None
    pins: str = "-"  # ok, or the drift from the plan's pins
    apply: str | None = None  # an apply in progress: who runs it

    @property
    def healthy(self) -> bool:
        return self.state == "running" and self.health == "200"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def status(handle: ServiceHandle, inventory: Inventory, api_key: str | None,
           *, key_missing: str | None = None) -> ServiceStatus:
    """Process, pins and the server's own answers (health, served names, version).
    `key_missing` says why the API key is unknown (then the served names are not asked)."""
    plan = handle.plan
    row = ServiceStatus(host=handle.transport.host, backend=handle.backend)
    if handle.facts.service is not None and handle.facts.service.apply_lock is not None:
        holder = Holder.parse(handle.facts.service.apply_lock)
        row.apply = holder.describe() if holder is not None else "in progress"
    process = handle.process
    if process:
        row.state, row.pid = "running", process.pid
        row.uptime_s = round(process.uptime or 0)
    elif handle.facts.service is not None and handle.facts.service.pid:
        row.state = "dead"
    venv = handle.facts.venv
    if venv is not None and not venv.exists:
        row.pins = f"no venv at {venv.path}"
    elif venv is not None:
        drift = pin_drift(venv.installed(), plan.install.pins())
        row.pins = "; ".join(drift) or "ok"
    if process:
        with reach(handle.transport, inventory, plan) as base_url, \
                ServerClient(base_url, api_key=api_key, timeout=5) as client:
            answers = client.describe()
        row.health = answers.health
        row.vllm_version = answers.version
        row.served = [f"({key_missing})"] if key_missing else answers.served
    return row


def stop(handle: ServiceHandle) -> bool:
    """Stop the service; whether it was running."""
    was_running = handle.process is not None or handle.backend == "systemd"
    handle.transport.run(stop_command(handle.backend, handle.paths), timeout=120)
    return was_running


def log_tail(handle: ServiceHandle, lines: int) -> str:
    return handle.transport.run(tail_command(handle.paths, lines), check=False).stdout


def follow_log(handle: ServiceHandle, every: float = 1.0) -> Iterator[bytes]:
    """New log bytes as they come (until the caller stops iterating)."""
    size = handle.transport.run(
        Command("stat", "-c", "%s", handle.paths.log, Raw("2>/dev/null"), Raw("||"), "echo", "0"),
        check=False,
    ).stdout.strip()
    offset = int(size) if size.isdigit() else 0
    while True:
        time.sleep(every)
        _, chunk = parse_watch(handle.transport.run(
            watch_command(handle.backend, handle.paths, offset), check=False).stdout)
        offset += len(chunk)
        if chunk:
            yield chunk

