"""The service's traces on the host (and those of the units beside it, a Ray node of a
cluster): pidfile and process, its state files' digests, systemd's view of its unit, who
listens on its port, who holds the apply lock, the same service started from another venv."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import errno
import fcntl
import glob
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from orchestrator.facts.common import read_text, run_tool
from orchestrator.facts.fact import Fact, as_int, as_str
from orchestrator.facts.processes import Process, group_members, read_process

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def parse_listening_ports(text: str) -> Dict[int, str]:
    """/proc/net/tcp or tcp6 -> listening port: socket inode (no ss or netstat needed)."""
    ports: Dict[int, str] = {}
    for line in text.splitlines()[1:]:
        cells = line.split()
        if len(cells) > 9 and cells[3] == "0A":  # 0A = LISTEN
            ports.setdefault(int(cells[1].rsplit(":", 1)[1], 16), cells[9])
    return ports


def parse_systemctl_show(text: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def _listening_ports() -> Dict[int, str]:
    ports: Dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for port, inode in parse_listening_ports(read_text(table) or "").items():
            ports.setdefault(port, inode)
    return ports


def _pids_by_inode(inodes: List[str]) -> Dict[str, int]:
    wanted = {f"socket:[{inode}]" for inode in inodes}
    found: Dict[str, int] = {}
    for pid_dir in glob.glob("/proc/[0-9]*"):
        try:
            for fd in os.listdir(pid_dir + "/fd"):
                try:
                    target = os.readlink(pid_dir + "/fd/" + fd)
                except OSError:
                    continue
                if target in wanted:
                    found[target[8:-1]] = int(pid_dir[6:])
        except OSError:
            continue
    return found


def _lock_holder(path: str) -> Optional[str]:
    """Who holds the apply lock (its file's text, cut short), or None when nobody does. Not
    through a symlink, nor from a FIFO (which would block): the lock program refuses both."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except OSError:
        return (os.read(fd, 2048).decode("utf-8", "replace") or "{}").strip()
    finally:
        os.close(fd)


def _owned_process(pidfile: str) -> Tuple[Optional[int], Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """(pid, process, stale) from a pidfile holding `PID STARTTIME`: a live process with
    that pid but another start time is not ours (the pid was reused): stale, not running."""
    fields = (read_text(pidfile) or "").split()
    if not fields or not fields[0].isdigit():
        return None, None, None
    pid = int(fields[0])
    process = read_process(pid)
    if process is not None and (len(fields) < 2 or str(process["start_ticks"]) != fields[1]):
        return pid, None, process
    return pid, process, None


def _registry_text(path: str) -> Tuple[str, Optional[str]]:
    """The registry entry's text (its first 64 KiB), and what is wrong with it: not through a
    symlink, nor from a FIFO or a device (which could block or never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return "", None if error.errno == errno.ENOENT else \
            ("is a symlink" if error.errno == errno.ELOOP else error.strerror)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", "is not a regular file"
        return os.read(fd, 65536).decode("utf-8", "replace"), None
    finally:
        os.close(fd)


def registry_folders(spec: Dict[str, Any]) -> Tuple[List[str], Optional[str]]:
    """The state folders the host's registry entry lists, and what is wrong with the entry:
    orch writes only `/.../.orch/service/NAME` lines, and drops the rest at the next start."""
    tail = "/.orch/service/" + os.path.basename(spec["state_dir"])
    text, problem = _registry_text(os.path.expanduser(spec["registry"]))
    lines = [line.strip() for line in text.split("\n")]
    folders = [f for f in lines if f.startswith("/") and f.endswith(tail) and len(f) > len(tail)]
    garbage = sum(1 for f in lines if f and f not in folders)
    if garbage and problem is None:
        problem = (f"holds {garbage} line that names no state folder" if garbage == 1 else
                   f"holds {garbage} lines that name no state folder")
    return list(dict.fromkeys(folders)), problem


def _other_instance(spec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The service of the same name started from another state folder (another venv): the
    host's registry lists every folder that started it, the latest last. The one that counts
    is the one running on the plan's port (a replace stops it), else the latest running one,
    else the latest: a plan whose own venv runs the name on another port still finds the
    one on its port."""
    if not spec.get("registry") or not spec.get("state_dir"):
        return None
    folders = [f for f in registry_folders(spec)[0] if f != spec["state_dir"]]
    found = []
    for folder in folders:
        pid, process, _ = _owned_process(os.path.join(folder, "pid"))
        text = read_text(os.path.join(folder, "spec.json"))
        try:
            port = json.loads(text or "{}").get("port")
        except (ValueError, AttributeError):
            port = None
        found.append(({"state_dir": folder, "pid": pid, "process": process, "spec": text},
                      port))
    if not found:
        return None
    live = [(other, port) for other, port in found if other["process"] is not None]
    on_port = [other for other, port in live if spec.get("port") is not None
               and port == spec.get("port")]
    return (on_port or [other for other, _ in live] or [found[-1][0]])[-1]


def service_facts(spec: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"pid": None, "process": None, "other": _other_instance(spec)}
    if spec.get("registry") and spec.get("state_dir"):
        out["registry_problem"] = registry_folders(spec)[1]
    if spec.get("pidfile"):
        pid, process, stale = _owned_process(spec["pidfile"])
        if pid is not None:
            out["pid"], out["process"] = pid, process
            if process is None and stale is None:
                out["survivors"] = group_members(pid)
        if stale is not None:
            out["stale_pid"] = stale
    for key in ("spec_file", "env_file", "unit_file"):
        path = spec.get(key)
        if path:
            data = read_text(path)
            out[key] = hashlib.sha256(data.encode()).hexdigest() if data is not None else None
    if spec.get("spec_file"):
        out["spec"] = read_text(spec["spec_file"])
    if spec.get("startup_file"):
        out["startup"] = read_text(spec["startup_file"])
    if spec.get("restart_file"):
        out["restart_requested"] = os.path.exists(spec["restart_file"])
    if spec.get("unit"):
        props = parse_systemctl_show(run_tool([
            "systemctl", "show", spec["unit"],
            "--property=ActiveState,SubState,MainPID,ExecMainStartTimestampMonotonic"]) or "")
        out["unit_state"] = props
        main_pid = props.get("MainPID", "0")
        if main_pid.isdigit() and int(main_pid) > 0:
            out["pid"] = int(main_pid)
            out["process"] = read_process(int(main_pid))
    if spec.get("lock"):
        out["apply_lock"] = _lock_holder(os.path.expanduser(spec["lock"]))
    port = spec.get("port")
    if port:
        inode = _listening_ports().get(int(port))
        holder = None
        if inode is not None:
            pid = _pids_by_inode([inode]).get(inode)
            holder = read_process(pid) if pid else {"pid": None, "cmdline": [], "uptime": None}
        out["port"] = {"number": int(port), "listening": inode is not None, "holder": holder}
    return out


def gather_service(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["service"]`: the service's spec (service/step.py: service_request);
    `request["units"]`: name -> the same for each unit beside it."""
    if request.get("service"):
        answer["service"] = service_facts(request["service"])
    if request.get("units"):
        answer["units"] = {name: service_facts(spec) for name, spec in request["units"].items()}


# == controller side ==


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
        return cls(state_dir=data["state_dir"], pid=as_int(data.get("pid")),
                   process=Process.from_json(data.get("process")),
                   spec_text=as_str(data.get("spec")))


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
    registry_problem: str | None = None  # what is wrong with the host's registry entry
    # Processes of its group still alive after its leader died (vLLM's engine and workers).
    survivors: tuple[Process, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceFacts:
        port = data.get("port")
        return cls(
            pid=as_int(data.get("pid")),
            process=Process.from_json(data.get("process")),
            stale_pid=Process.from_json(data.get("stale_pid")),
            spec_text=as_str(data.get("spec")),
            startup_text=as_str(data.get("startup")),
            restart_requested=bool(data.get("restart_requested")),
            digests={k: as_str(data.get(k)) for k in ("spec_file", "env_file", "unit_file") if k in data},
            unit_state=data.get("unit_state") if isinstance(data.get("unit_state"), dict) else None,
            port=PortFacts(int(port["number"]), bool(port.get("listening")),
                           Process.from_json(port.get("holder")))
            if isinstance(port, dict) else None,
            apply_lock=as_str(data.get("apply_lock")),
            other=OtherInstance.from_json(data.get("other")),
            registry_problem=as_str(data.get("registry_problem")),
            survivors=tuple(p for p in map(Process.from_json, data.get("survivors") or [])
                            if p is not None),
        )


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    service = answer.get("service")
    return {"service": ServiceFacts.from_json(service) if isinstance(service, dict) else None,
            "units": {name: ServiceFacts.from_json(unit)
                      for name, unit in (answer.get("units") or {}).items()
                      if isinstance(unit, dict)}}


FACT = Fact(gather="gather_service", parse=parse)
