"""One apply at a time per host and venv, and per host and service: locks taken ON the host,
so two controllers collide as surely as two terminals of one controller.

An apply holds flock(2)s on `<venv>/.orch/apply-<host>.lock` (one install at a time into a
venv; `~/.orch/locks/<plan>-<host>.lock` for a plan without one) and, for a plan with a
service, `~/.orch/locks/service-<name>-<host>.lock` (a service is (host, name): two plans that
put it in different venvs replace each other's, so their applies must not overlap). Files are
named after the inventory host, since a venv or a home folder may live on a filesystem several
hosts share. One small program takes them in that order (so two applies cannot each hold one
and wait for the other's) and `Transport.hold` keeps it running for the whole apply. It writes
who holds them into each file (user, controller, pid, run folder, since) and waits for its
input to close: when the apply ends, or its connection or its process dies, the program ends
and the kernel releases the locks. A dead apply's locks are therefore released by themselves;
one whose holder survived (an SSH session the host has not noticed is dead yet) is recognised
when it names this controller and a process that no longer runs, and taken over.
`--break-lock` takes over any lock, for the case nothing else can tell.

The probe reads the service's file (`service_facts`): `orch status` shows an apply of the
service in progress, from whichever venv.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.errors import LockBusy
from orchestrator.runs.layout import safe_name
from orchestrator.transport.base import Held, Transport
from orchestrator.transport.command import Command

LOCK_TIMEOUT_S = 60.0  # to start the lock program and hear from it (not the waiting itself)
_PROGRAM = r"""
import fcntl, json, os, signal, sys, time
paths, holder, wait, evict = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "wait", sys.argv[4]
def current(fd):
    os.lseek(fd, 0, 0)
    return os.read(fd, 65536).decode("utf-8", "replace").replace("\n", " ").strip() or "{}"
if evict.isdigit():
    try:
        with open("/proc/%s/cmdline" % evict, "rb") as handle:
            if b"orch-apply-lock" in handle.read():
                os.kill(int(evict), signal.SIGKILL)
    except OSError:
        pass
fds = []
for path in paths:
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if not wait:
                print("busy " + json.dumps([path, current(fd)]), flush=True)
                sys.exit(0)
            if not told:
                print("waiting " + json.dumps([path, current(fd)]), flush=True)
                told = True
            time.sleep(0.5)
    fds.append(fd)
holder["host_pid"] = os.getpid()
for fd in fds:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, 0)
    os.write(fd, json.dumps(holder).encode())
print("locked", flush=True)
sys.stdin.read()
for fd in fds:
    os.ftruncate(fd, 0)
"""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the lock file says."""

    user: str
    controller: str
    pid: int
    run: str | None
    since: str
    command: str = "apply"
    host_pid: int | None = None  # the lock program on the host

    @classmethod
    def me(cls, run: str | None, command: str) -> Holder:
        return cls(user=getpass.getuser(), controller=socket.gethostname(), pid=os.getpid(),
                   run=run, since=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                   command=command)

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict):
            return None
        try:
            return cls(user=str(data.get("user", "?")), controller=str(data.get("controller", "?")),
                       pid=int(data.get("pid", 0)), run=data.get("run"),
                       since=str(data.get("since", "?")), command=str(data.get("command", "apply")),
                       host_pid=int(data["host_pid"]) if data.get("host_pid") else None)
        except (TypeError, ValueError):
            return None

    def describe(self) -> str:
        where = f", run folder {self.run}" if self.run else ""
        return (f"{self.user}@{self.controller} (pid {self.pid}, `orch {self.command}`{where}) "
                f"since {self.since}")

    def is_gone(self) -> bool:
        """It names this controller, and its process no longer runs."""
        if self.controller != socket.gethostname() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def lock_path(venv: str | None, plan_name: str, host: str) -> str:
    """The venv's lock (the plan's own for a plan without a venv)."""
    name = safe_name(host)
    if venv:
        return f"{venv.rstrip('/')}/.orch/apply-{name}.lock"
    return f"~/.orch/locks/{plan_name}-{name}.lock"


def service_lock_path(service: str, host: str) -> str:
    """The service's lock: the same for every plan that names the service."""
    return f"~/.orch/locks/service-{safe_name(service)}-{safe_name(host)}.lock"


def lock_paths(venv: str | None, plan_name: str, service: str | None,
               host: str) -> tuple[str, ...]:
    """The locks an apply holds on a host, in the order they are taken."""
    first = lock_path(venv, plan_name, host)
    return (first,) if service is None else (first, service_lock_path(service, host))


def _command(paths: tuple[str, ...], holder: Holder, *, wait: bool, evict: int | None) -> Command:
    return Command("python3", "-S", "-c", _PROGRAM, json.dumps(list(paths)),
                   json.dumps(asdict(holder)), "wait" if wait else "once", str(evict or "-"),
                   "orch-apply-lock")


def _busy(answer: str) -> tuple[str, Holder | None]:
    """The lock file a `busy`/`waiting` answer names, and who holds it."""
    try:
        path, text = json.loads(answer.split(" ", 1)[1])
        return str(path), Holder.parse(str(text))
    except (IndexError, ValueError, TypeError):
        return "?", None


class HostLock:
    """Locks being taken: started at once, the answer read when it is needed (so taking them
    costs no round trip of its own: it overlaps the probe)."""

    def __init__(self, transport: Transport, paths: tuple[str, ...], holder: Holder, *,
                 wait: bool, break_lock: bool, on_wait: Callable[[Holder | None], None]) -> None:
        self.transport = transport
        self.paths = paths
        self.holder = holder
        self.wait = wait
        self.break_lock = break_lock
        self.on_wait = on_wait
        self.held: Held | None = transport.hold(_command(paths, holder, wait=wait, evict=None))
        self.taken = False

    def acquire(self) -> None:
        """Block until the locks are ours; LockBusy names the holder otherwise."""
        assert self.held is not None
        while True:
            answer = self.held.line(timeout=None if self.wait else LOCK_TIMEOUT_S)
            if answer == "locked":
                self.taken = True
                return
            if answer is not None and answer.startswith("waiting "):
                self.on_wait(_busy(answer)[1])
                continue
            path, holder = _busy(answer) if answer and answer.startswith("busy ") else ("?", None)
            self.held.release()
            self.held = None
            if holder is not None and (self.break_lock or holder.is_gone()):
                self.held = self.transport.hold(
                    _command(self.paths, self.holder, wait=True, evict=holder.host_pid))
                self.break_lock = False
                continue
            if holder is None:
                raise LockBusy(f"{self.transport.host}: could not take the apply lock "
                               f"{self.paths[0]} (the lock program said {answer!r})",
                               hint="the host needs python3 on its PATH")
            raise LockBusy(
                f"{self.transport.host}: another apply holds {path}: {holder.describe()}",
                hint="wait for it (`--wait`), or if that apply is gone for good, `--break-lock`",
            )

    def release(self) -> None:
        if self.held is not None:
            self.held.release()
            self.held = None
