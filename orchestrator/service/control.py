"""Looking after a service on one host: reach it, wait until it is ready (relaunching an
unexplained death), read its state, its log, stop it.

The step (`service/step.py`) decides whether to start or restart; everything after that is
here, for `orch apply`'s ready stage and for `orch status|logs|stop` alike. Each function
takes a live transport and the plan; nothing here prints.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from orchestrator.bench.reach import bench_url
from orchestrator.engines.compile_cache import Start, start_kind
from orchestrator.engines.kernels import FALLBACK_FIX, fallbacks_of
from orchestrator.engines.kernels import describe as describe_kernels
from orchestrator.errors import OrchError
from orchestrator.events import Emit, StageEvent
from orchestrator.facts import Facts, ProbeRequest, Process, ServiceFacts, probe
from orchestrator.facts.venv_trust import refusal, venv_trust
from orchestrator.holder import describe_text
from orchestrator.inventory import Inventory
from orchestrator.packages import pin_drift
from orchestrator.plan.models import Plan
from orchestrator.runs.run_records import Startup
from orchestrator.server_client import ServerClient
from orchestrator.service.backends import (
    Backend,
    ServicePaths,
    describe_survivors,
    start_command,
    stop_command,
    watch_command,
)
from orchestrator.service.host_state import last_kernels, other_port, record_of
from orchestrator.service.lock import service_lock_path
from orchestrator.service.readiness import Readiness, parse_watch, wait_ready
from orchestrator.service.step import ServiceStep, choose_backend, registry_note, service_request
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, quoted

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@contextlib.contextmanager
def reach(transport: Transport, inventory: Inventory, plan: Plan) -> Iterator[str]:
    """The base URL of the host's service as seen from here: direct for this machine or an
    exposed port, an SSH port forward for `bench.via: ssh` or a loopback-only service."""
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
    start: Start | None = None  # warm or cold (engines/compile_cache.py)
    compile_cache: dict[str, Any] | None = None


def relaunch(transport: Transport, step: ServiceStep) -> None:
    """Stop first (leftover workers hold GPU memory and the port), then start."""
    transport.run(stop_command(step.backend, step.paths, engine=step.spec.engine).then(
        start_command(step.backend, step.spec, step.paths)), timeout=120)


def stopped(transport: Transport, step: ServiceStep) -> bool:
    """Whether the service is down because `orch stop` stopped it (its marker, which a stop
    leaves before it signals the server): then it is not relaunched."""
    state, _ = parse_watch(transport.run(watch_command(step.backend, step.paths, 1 << 62),
                                         check=False, timeout=60).stdout)
    return state == "stopped"


def ready(
    transport: Transport, step: ServiceStep, plan: Plan, *, base_url: str,
    api_key: str | None, launched: bool, emit: Emit,
    still_ours: Callable[[float], None] = lambda wait: None,
) -> Ready:
    """Wait for the service the step started (phases, diagnosis, relaunch within the
    restart budget); an unchanged running service gets one readiness check, no log replay.
    `still_ours(wait)` raises once the apply's locks are another's (asked at every poll)."""
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
        engine_name=plan.service.engine, still_ours=still_ours,
    )
    start, cache = warm_or_cold(step, readiness.facts)
    # Kept on the host, so the next `orch plan` can say what a restart would cost.
    took = Startup(seconds=round(readiness.seconds, 1), restarts=readiness.restarts,
                   phases=readiness.phases,  # and the kernels, which orch status shows
                   facts={"kernels": readiness.facts.get("kernels") or {}},
                   start=start, compile_cache=cache)
    transport.put(took.model_dump_json().encode(), step.paths.startup_file)
    said_kernels(transport.host, readiness.facts.get("kernels"), emit)
    return Ready(base_url, model, readiness=readiness, start=start, compile_cache=cache)


def warm_or_cold(step: ServiceStep, facts: dict[str, Any]) -> tuple[Start | None, dict[str, Any] | None]:
    """Whether the start was warm (engines/compile_cache.py), and the record of its cache:
    root, filled before the launch, what the log said of the graphs."""
    if step.compile_cache is None:
        return None, None
    graphs = facts.get("compile_graphs")
    graphs = graphs if isinstance(graphs, dict) else {}
    record = {"root": step.compile_cache["root"], "existed": step.cache_before, **graphs}
    return start_kind(step.cache_before, graphs), record


def said_kernels(host: str, kernels: dict[str, Any] | None, emit: Emit) -> None:
    """The kernels the start-up chose, one line; each fallback vLLM warned about, a warning."""
    if not kernels:
        return
    emit(StageEvent(host, stage="startup", status="ok",
                    message=f"kernels: {describe_kernels(kernels, fallbacks=False)}"))
    for fallback in fallbacks_of(kernels):
        emit(StageEvent(host, stage="startup", status="warning",
                        message=f"kernel fallback: {fallback} (fix: {FALLBACK_FIX})"))


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
    unit: str | None = None  # a process beside the server ("ray": a Ray node)
    serves: bool = True  # has an API to ask (not a Ray node, not a headless mp worker)

    @classmethod
    def look(cls, transport: Transport, plan: Plan, unit: str | None = None,
             *, serves: bool = True) -> ServiceHandle:
        assert plan.service is not None and plan.python is not None
        name = plan.service.name if unit is None else f"{plan.service.name}-{unit}"
        paths = ServicePaths.for_venv(plan.python.venv, name)
        lock = service_lock_path(plan.service.name, transport.host)  # from any venv
        wanted = service_request(paths, plan.service, lock, port=unit is None)
        request = ProbeRequest(venv=plan.python.venv, service=wanted) if unit is None else \
            ProbeRequest(venv=plan.python.venv, units={unit: wanted})
        facts = probe(transport, request)
        found = facts.service if unit is None else facts.units.get(unit)
        other = found.other if found is not None and unit is None else None
        if found is not None and found.process is None and other is not None and \
                other.process is not None and other_port(other) in (None, plan.service.port):
            # The service of this name runs from another venv (a plan moved it): status,
            # logs and stop look after that one, which is the service of this name.
            paths = ServicePaths(name, other.state_dir)
            found = replace(found, pid=other.pid, process=other.process,
                            spec_text=other.spec_text, other=None)
            facts.service = found
        recorded = record_of(found)
        backend = (recorded.backend if recorded is not None else None) or \
            choose_backend(plan.service.backend, facts.host)
        return cls(transport, plan, paths, backend, facts, unit, serves and unit is None)

    @property
    def found(self) -> ServiceFacts | None:
        return self.facts.service if self.unit is None else self.facts.units.get(self.unit)

    @property
    def process(self) -> Process | None:
        return self.found.process if self.found is not None else None


@dataclass
class ServiceStatus:
    host: str
    backend: str
    unit: str = "server"  # or "ray" (a Ray node), "headless" (an mp worker)
    state: str = "stopped"  # running, dead (a pidfile but no process), stopped
    pid: int | None = None
    uptime_s: int | None = None
    health: str = "-"  # the /health status code, or why it could not be asked
    served: list[str] = field(default_factory=list)
    vllm_version: str | None = None
    pins: str = "-"  # ok, or the drift from the plan's pins
    apply: str | None = None  # an apply in progress: who runs it
    kernels: dict[str, Any] = field(default_factory=dict)  # what its start-up chose
    registry: str | None = None  # what is wrong with the host's registry entry of its name
    workers: list[str] | None = None  # a fleet's router: the workers it lists

    @property
    def healthy(self) -> bool:
        return self.state == "running" and (self.health == "200" or self.unit != "server")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def status(handle: ServiceHandle, inventory: Inventory, api_key: str | None,
           *, key_missing: str | None = None) -> ServiceStatus:
    """Process, pins and the server's own answers (health, served names, version).
    `key_missing` says why the API key is unknown (then the served names are not asked)."""
    plan = handle.plan
    unit = handle.unit or ("server" if handle.serves else "headless")
    row = ServiceStatus(host=handle.transport.host, backend=handle.backend, unit=unit)
    found = handle.found
    if found is not None and found.apply_lock is not None:
        row.apply = describe_text(found.apply_lock)
    if found is not None and found.registry_problem:
        row.registry = registry_note(handle.paths, found)
    process = handle.process
    if process:
        row.state, row.pid = "running", process.pid
        row.uptime_s = round(process.uptime or 0)
        row.kernels = last_kernels(found)
    elif found is not None and found.pid:
        row.state = "dead"
        if found.survivors:  # what a dead server left holding memory, GPUs or the port
            row.state = f"dead; {describe_survivors(found.survivors)}"
    venv = handle.facts.venv
    if venv is not None and not venv.exists:
        row.pins = f"no venv at {venv.path}"
    elif venv is not None:
        drift = pin_drift(venv.installed(), plan.install.pins())
        row.pins = "; ".join(drift) or "ok"
    if process and handle.serves:
        with reach(handle.transport, inventory, plan) as base_url, \
                ServerClient(base_url, api_key=api_key, timeout=5) as client:
            answers = client.describe()
        row.health = answers.health
        row.vllm_version = answers.version
        row.served = [f"({key_missing})"] if key_missing else answers.served
    return row


def stop(handle: ServiceHandle) -> bool:
    """Stop the service; whether it was running. Not in a venv another user could change:
    the stop writes its marker there and signals the pid its pidfile names, as the user."""
    assert handle.plan.python is not None
    said = refusal(venv_trust(handle.facts.extra), handle.plan.python.venv, "writes and signals")
    if said is not None:
        raise OrchError(f"{handle.transport.host}: {said}")
    found = handle.found
    was_running = handle.process is not None or handle.backend == "systemd" or bool(
        found is not None and found.survivors)
    assert handle.plan.service is not None
    engine = "ray" if handle.unit == "ray" else handle.plan.service.engine
    handle.transport.run(stop_command(handle.backend, handle.paths, engine=engine), timeout=120)
    return was_running


_NO_LOG = 66  # log_tail's exit code when there is no log file


@dataclass(frozen=True)
class LogTail:
    """The log's last lines, and where they end (`follow_log` starts there: a line written
    meanwhile is neither lost nor shown twice)."""

    text: str
    offset: int
    inode: str


def log_tail(handle: ServiceHandle, lines: int) -> LogTail | None:
    """The log's last `lines` lines; None when there is no log file at all (the service
    never ran on this host from the plan's venv), which an empty log is not."""
    log = quoted(handle.paths.log)
    result = handle.transport.run(Command.script(
        f"test -e {log} || exit {_NO_LOG}; "
        f'set -- $(stat -L -c "%s %i" {log} 2>/dev/null); echo "${{1:-0}} ${{2:--}}"; '
        f'head -c "${{1:-0}}" {log} 2>/dev/null | tail -n {int(lines)} || true'),
        check=False)
    if result.returncode == _NO_LOG:
        return None
    state, _, text = result.stdout.partition("\n")
    size, _, inode = state.partition(" ")
    return LogTail(text, int(size) if size.isdigit() else 0, inode or "-")


@dataclass(frozen=True)
class LogReplaced:
    """Said by `follow_log` when the log it follows was replaced or cut (a restart moves the
    last start's log to `service.log.1`): what follows is the new log from its start."""

    log: str


def _follow_command(log: str, offset: int, inode: str) -> Command:
    """The log's state then its bytes from `offset`, in one round trip: `same INODE` (the file
    followed, at least `offset` long), `new INODE` (another file, or a shorter one: from its
    start) or `gone` (none at the moment: nothing changes), then base64 like watch_command's."""
    q = quoted(log)
    return Command.script(
        f'set -- $(stat -L -c "%s %i" {q} 2>/dev/null); '
        'if [ -z "$2" ]; then echo gone; exit 0; fi; '
        f'if [ "$2" = {quoted(inode)} ] && [ "$1" -ge {int(offset)} ]; then from={int(offset)}; '
        'echo "same $2"; else from=0; echo "new $2"; fi; '
        f'tail -c +$((from + 1)) {q} 2>/dev/null | base64 -w0 || true')


def follow_log(handle: ServiceHandle, start: LogTail,
               every: float = 1.0) -> Iterator[bytes | LogReplaced]:
    """New log bytes from the end of `start` as they come (until the caller stops
    iterating); `LogReplaced` before the first bytes of a new log (its inode changed, or it
    is shorter than what was read)."""
    log, offset, inode = handle.paths.log, start.offset, start.inode
    while True:
        time.sleep(every)
        state, chunk = parse_watch(handle.transport.run(
            _follow_command(log, offset, inode), check=False).stdout)
        kind, _, now = state.partition(" ")
        if kind == "gone":
            continue
        if kind == "new" and inode not in ("-", ""):
            yield LogReplaced(log)
        offset = (0 if kind == "new" else offset) + len(chunk)
        inode = now
        if chunk:
            yield chunk
