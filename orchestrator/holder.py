"""Who holds a lock (a host's apply and service locks, a run folder's), as its file says, and
who this controller is.

A holder names its controller by hostname for people, and by an identity for orch: the
machine, its boot and the PID namespace the controller runs in (`controller_id`). A lock is
only ever taken over as a dead apply's when its holder has this controller's identity and
its process no longer runs (or its pid is another process's now): a container or a cloned
VM shares the hostname, and a controller in a PID namespace of its own cannot see the other's
pid, but neither shares all three. The text of a lock file is the host's (or anyone's who
can write the folder): every value read from it is cut short and shown printable.
"""

from __future__ import annotations

import datetime as dt
import functools
import getpass
import hashlib
import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_MACHINE_IDS = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
TOKEN_FILE = "~/.orch/controller-id"  # where /proc cannot say (a controller that is not Linux)


def printable(value: object, limit: int = 200) -> str:
    text = str(value)
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read(200).strip()
    except OSError:
        return ""


@functools.cache
def controller_id() -> str:
    """This controller's identity: a hash of the machine id, the boot id and the PID
    namespace; a random token kept in ~/.orch/controller-id where there is no /proc."""
    try:
        namespace = os.stat("/proc/self/ns/pid")
    except OSError:
        return _token()
    boot = _read(_BOOT_ID)
    if not boot:
        return _token()
    machine = next((text for text in map(_read, _MACHINE_IDS) if text), "")
    parts = f"{machine}\0{boot}\0{namespace.st_dev}:{namespace.st_ino}"
    return hashlib.sha256(parts.encode()).hexdigest()[:24]


def _token() -> str:
    path = Path(os.path.expanduser(TOKEN_FILE))
    token = secrets.token_hex(12)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
    except FileExistsError:
        kept = printable(_read(str(path)), 64)
        return kept or token
    except OSError:
        pass  # a home orch cannot write: an identity of this process alone (never stale)
    return token


def process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat), so a pid used
    again by another process is told apart; "" where it cannot be read."""
    stat = _read(f"/proc/{pid}/stat") if pid > 0 else ""
    fields = stat.rpartition(") ")[2].split()
    return fields[19] if len(fields) > 19 else ""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the lock file says."""

    user: str
    controller: str  # its hostname, for people
    pid: int
    run: str | None
    since: str
    command: str = "apply"
    host_pid: int | None = None  # the lock program on the host
    controller_id: str = ""  # its identity, for orch (empty: an older orch's, never stale)
    pid_start: str = ""  # when its process started (process_start)

    @classmethod
    def me(cls, run: str | None, command: str) -> Holder:
        return cls(user=getpass.getuser(), controller=socket.gethostname(), pid=os.getpid(),
                   run=run, since=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                   command=command, controller_id=controller_id(),
                   pid_start=process_start(os.getpid()))

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder a lock file's text names; None for a text orch did not write (the
        file is the host's: any value is cut short and shown printable)."""
        try:
            data: Any = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict):
            return None
        run = data.get("run")
        try:
            return cls(user=printable(data.get("user", "?")),
                       controller=printable(data.get("controller", "?")),
                       pid=int(data.get("pid", 0)),
                       run=printable(run) if isinstance(run, str) else None,
                       since=printable(data.get("since", "?")),
                       command=printable(data.get("command", "apply")),
                       host_pid=int(data["host_pid"]) if data.get("host_pid") else None,
                       controller_id=printable(data.get("controller_id", ""), 64),
                       pid_start=printable(data.get("pid_start", ""), 32))
        except (TypeError, ValueError, OverflowError):
            return None

    def describe(self) -> str:
        where = f", run folder {self.run}" if self.run else ""
        return (f"{self.user}@{self.controller} (pid {self.pid}, `orch {self.command}`{where}) "
                f"since {self.since}")

    def same(self, other: Holder) -> bool:
        """The same apply (one process of one controller, since one moment)."""
        return (self.controller_id, self.controller, self.pid, self.since) == \
            (other.controller_id, other.controller, other.pid, other.since)

    def is_gone(self) -> bool:
        """It is of this controller (its identity, not only its hostname), and its process
        no longer runs: no process has its pid, or another process does now."""
        if not self.controller_id or self.controller_id != controller_id() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        now = process_start(self.pid)
        return bool(self.pid_start and now and now != self.pid_start)


def describe_text(text: str) -> str:
    """Who a lock file's text names; a text orch did not write, shown short and printable."""
    holder = Holder.parse(text)
    if holder is not None:
        return holder.describe()
    more = "..." if len(text) > 80 else ""
    return f"a holder orch cannot read (the file holds {printable(text, 80)!r}{more})"
