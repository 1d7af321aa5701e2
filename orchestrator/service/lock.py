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
when it has this controller's identity (holder.py: the machine, its boot and PID namespace,
not the hostname alone) and a process that no longer runs, and taken over.
`--break-lock` takes over any lock, for the case nothing else can tell: the program finds the
process holding the flock in /proc/locks and ends it only if it is an orch lock program,
having written its own holder first, so the broken apply's program says who took it (`broken`)
and that apply stops at its next step or poll (`LockGuard`). `orch stop` takes the service's lock the same way.

The files are orch's own: opened with O_NOFOLLOW, refused when not a regular file of one link,
and the `.orch` folders on their path must be real folders; what cannot be used is an
`error` answer naming the path (LockError), never a holder's JSON written through a link.

An apply gives the program the fact program too (on its input, after the locks' request):
once it holds the locks it runs it and answers with the facts, so the facts are read under
the locks and the whole start of a host's converge is one round trip.

The probe reads the service's file (`service_facts`): `orch status` shows an apply of the
service in progress, from whichever venv.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.errors import LockBusy, LockError, OrchError
from orchestrator.facts.compiled import RUNNER
from orchestrator.facts.probe import probe_failed
from orchestrator.holder import Holder, describe_text, printable
from orchestrator.runs.layout import safe_name
from orchestrator.transport.base import Held, Transport
from orchestrator.transport.command import Command

LOCK_TIMEOUT_S = 60.0  # to start the lock program and hear from it (not the waiting itself)
_PROGRAM = RUNNER + r"""
import errno, fcntl, json, os, signal, stat, sys, time
paths, holder, wait, evict, probe = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "wait", json.loads(sys.argv[4]), int(sys.argv[5])
# The fact program is read before any waiting: a controller writing more than a pipe holds
# (64 KiB) would block on a program that waits for a lock, and never hear it say so.
program = sys.stdin.buffer.read(probe) if probe else b""
def say(word, *data):
    print(word + " " + json.dumps(list(data)), flush=True)
def current(fd):
    os.lseek(fd, 0, 0)
    return " ".join(os.read(fd, 2048).decode("utf-8", "replace").split()) or "{}"
def folders(path):
    parts = path.split("/")
    mine = max(i for i, p in enumerate(parts) if p == ".orch") if ".orch" in parts else len(parts) - 1
    os.makedirs("/".join(parts[:mine]) or "/", exist_ok=True)
    for i in range(mine, len(parts) - 1):
        folder = "/".join(parts[:i + 1])
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise OSError(errno.ENOTDIR, "it is not a folder (a symlink or a file stands there)", folder)
def opened(path):
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symlink (orch writes its lock files itself, never through a link)", path)
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        raise OSError(errno.EINVAL, "it is not a regular file of its own (a device, a FIFO or a hard link)", path)
    return fd
def taken(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
def holding(fd, path):
    ino, real = os.fstat(fd).st_ino, os.path.realpath(path)
    with open("/proc/locks") as table:
        rows = [line.split() for line in table if "->" not in line]
    for pid in [r[4] for r in rows if len(r) > 5 and r[1] == "FLOCK" and r[5].endswith(":%d" % ino)]:
        try:
            if any(os.readlink("/proc/%s/fd/%s" % (pid, n)) == real for n in os.listdir("/proc/%s/fd" % pid)):
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    return int(pid), handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            pass
    return None, ""
def end(fd, path):
    pid, cmdline = holding(fd, path)
    if pid is None or "orch-apply-lock" not in cmdline:
        say("foreign", path, pid, cmdline[:200])
        sys.exit(0)
    mine(fd)
    for sig, turns in ((signal.SIGTERM, 30), (signal.SIGKILL, 50)):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
        for _ in range(turns):
            if taken(fd):
                return
            time.sleep(0.1)
    say("error", path, "its holder, pid %d, did not end" % pid)
    sys.exit(0)
def mine(fd):
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, 0)
    os.write(fd, json.dumps(holder).encode())
fds = []
holder["host_pid"] = os.getpid()
for path in paths:
    path = os.path.expanduser(path)
    try:
        folders(path)
        fd = opened(path)
    except OSError as error:
        say("error", error.filename or path, error.strerror or str(error))
        sys.exit(0)
    told = False
    while not taken(fd):
        if evict and evict[0] == path and current(fd) == evict[1]:
            evict = None
            end(fd, path)
            continue
        if not wait:
            say("busy", path, current(fd))
            sys.exit(0)
        if not told:
            say("waiting", path, current(fd))
            told = True
        time.sleep(0.5)
    fds.append((path, fd))
for _, fd in fds:
    mine(fd)
def broken(*_):
    say("broken", *[[p, current(fd)] for p, fd in fds])
    os._exit(0)
signal.signal(signal.SIGTERM, broken)
print("locked", flush=True)
if probe:
    import io
    shown, sys.stdout = sys.stdout, io.StringIO()
    try:
        _orch_run(program, {"__name__": "__main__"})
        word, said = "probe", sys.stdout.getvalue()
    except BaseException:
        import traceback
        word, said = "probe-error", traceback.format_exc()
    sys.stdout = shown
    say(word, said)
sys.stdin.buffer.read()
for _, fd in fds:
    os.ftruncate(fd, 0)
"""


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


def _command(paths: tuple[str, ...], holder: Holder, *, wait: bool,
             evict: tuple[str, str] | None, probe: int) -> Command:
    return Command("python3", "-S", "-c", _PROGRAM, json.dumps(list(paths)),
                   json.dumps(asdict(holder)), "wait" if wait else "once",
                   json.dumps(list(evict) if evict else None), str(probe), "orch-apply-lock")


def _fields(answer: str) -> list[Any]:
    """The JSON list after an answer's first word (empty when it is not one)."""
    try:
        data = json.loads(answer.split(" ", 1)[1])
    except (IndexError, ValueError):
        return []
    return data if isinstance(data, list) else []


@dataclass(frozen=True)
class Busy:
    """A lock another holds: its file, and the text it holds."""

    path: str
    text: str

    @property
    def holder(self) -> Holder | None:
        return Holder.parse(self.text)

    def describe(self) -> str:
        return describe_text(self.text)


class HostLock:
    """Locks being taken: started at once, the answer read when it is needed; with `probe`,
    the same program then runs the fact program (taking them costs no round trip of its own)."""

    def __init__(self, transport: Transport, paths: tuple[str, ...], holder: Holder, *,
                 wait: bool, break_lock: bool, on_wait: Callable[[str], None],
                 on_takeover: Callable[[str], None] = lambda said: None,
                 probe: bytes = b"") -> None:
        self.transport = transport
        self.probe = probe  # the fact program, run once the locks are held: one round trip
        self.paths = paths
        self.holder = holder
        self.wait = wait
        self.break_lock = break_lock
        self.on_wait = on_wait
        self.on_takeover = on_takeover
        self.held: Held | None = self._hold(evict=None)
        self.taken = False
        self.took_over: Busy | None = None  # the holder whose lock this one took over
        self._taker: str | None = None  # who took the locks from this apply, once it is said

    def _hold(self, evict: tuple[str, str] | None) -> Held:
        command = _command(self.paths, self.holder, wait=self.wait, evict=evict,
                           probe=len(self.probe))
        return self.transport.hold(command, stdin=self.probe or None)

    def probed(self, timeout: float) -> str:
        """The fact program's output, once the locks are held (ProbeError when it failed)."""
        answer = self.held.line(timeout=timeout) if self.held is not None else None
        failure = self.held.failure() if self.held is not None and answer is None else None
        if failure is not None:
            raise failure
        fields = _fields(answer or "")
        word = (answer or "").split(" ", 1)[0]
        if word == "probe" and len(fields) == 1:
            return str(fields[0])
        said = str(fields[0]) if fields else f"(it said {(answer or 'nothing')[:200]!r})"
        raise probe_failed(self.transport.host, said)

    def acquire(self) -> None:
        """Block until the locks are ours; LockBusy names the holder, LockError the file
        that cannot be a lock."""
        assert self.held is not None
        while True:
            answer = self.held.line(timeout=None if self.wait else LOCK_TIMEOUT_S)
            if answer == "locked":
                self.taken = True
                if self.took_over is not None:
                    why = "--break-lock" if self.break_lock else "its process no longer runs"
                    self.on_takeover(f"took over {self.took_over.path} from "
                                     f"{self.took_over.describe()} ({why})")
                elif self.break_lock:  # the flag did nothing: say so, a typo'd plan looks alike
                    self.on_takeover(f"--break-lock: nothing held {', '.join(self.paths)}")
                return
            word = (answer or "").split(" ", 1)[0]
            fields = _fields(answer or "")
            busy = Busy(str(fields[0]), str(fields[1])) if word in ("busy", "waiting") and \
                len(fields) == 2 else None
            holder = busy.holder if busy is not None else None
            take = busy is not None and self.took_over != busy and (
                self.break_lock or (holder is not None and holder.is_gone()))
            if busy is not None and word == "waiting" and not take:
                self.on_wait(busy.describe())
                continue
            failure = self.held.failure() if answer is None else None
            self.held.release()
            self.held = None
            if failure is not None:  # the connection ended it, not the lock program
                raise failure
            if busy is not None and take:  # also with --wait: a gone holder is not waited for
                self.took_over = busy
                self.held = self._hold(evict=(busy.path, busy.text))
                continue
            raise self._busy(busy) if busy is not None else self._failed(word, fields, answer)

    def _busy(self, busy: Busy) -> LockBusy:
        holder = busy.holder
        who = "another apply" if holder is None or holder.command == "apply" else \
            f"`orch {holder.command}`"
        return LockBusy(
            f"{self.transport.host}: {who} holds {busy.path}: {busy.describe()}",
            hint="wait for it (`--wait`), or if that apply is gone for good, `--break-lock`")

    def _failed(self, word: str, fields: list[Any], answer: str | None) -> OrchError:
        host = self.transport.host
        if word == "error" and len(fields) == 2:
            return LockError(
                f"{host}: cannot take the lock at {fields[0]}: {fields[1]}",
                hint="orch keeps its lock files to itself: remove or fix what stands at that "
                     "path (or make its folder writable for the user orch logs in as)")
        if word == "foreign" and len(fields) == 3:
            pid = f"pid {fields[1]}" if fields[1] else "a process orch cannot see"
            return LockBusy(
                f"{host}: {fields[0]} is held by {pid} ({printable(fields[2]) or '?'}), not by an orch "
                f"lock program: --break-lock ends only orch's own",
                hint="end that process yourself, then apply again")
        said = "nothing" if answer is None else repr(answer[:200])
        return LockError(f"{host}: the lock program for {self.paths[0]} ended, or did not "
                         f"answer, without taking the lock (it said {said})",
                         hint="the host needs python3 on its PATH")

    def lost(self, wait: float = 0.0) -> str | None:
        """Who took the locks over while this apply held them (another's `--break-lock`, or
        a controller that took this one for dead), or None while they are still ours; `wait`:
        seconds to wait for the lock program's word (once the host has said the locks went)."""
        if self._taker is not None or self.held is None or not self.taken:
            return self._taker
        answer = self.held.line(timeout=wait)
        if answer is None or not answer.startswith("broken "):
            return None
        self._taker = "another apply (`--break-lock`)"
        for path, text in (f for f in _fields(answer) if isinstance(f, list) and len(f) == 2):
            other = Holder.parse(str(text))
            if other is None or not other.same(self.holder):
                self._taker = f"{path}: {describe_text(str(text))}"
                break
        return self._taker

    def release(self) -> None:
        if self.held is not None:
            self.held.release()
            self.held = None


class LockGuard:
    """Whether a host's locks are still this apply's: asked before each step, after converge,
    and by the long stages (every poll of a start-up, every second of a sweep), so an apply
    whose locks another took stops there rather than change the host beside it."""

    def __init__(self, host: str, lock: HostLock | None = None) -> None:
        self.host = host
        self.lock = lock  # None: nothing held (`orch plan`)

    def check(self, where: str, wait: float = 0.0) -> None:
        """LockBusy naming who took the locks, `where` saying when this apply saw it."""
        taker = self.lock.lost(wait) if self.lock is not None else None
        if taker is not None:
            raise LockBusy(f"{self.host}: this apply's lock was taken over {where}, by {taker}; "
                           "it stopped there (what it changed so far stays)",
                           hint="`--break-lock` is for an apply that is gone; run this plan "
                                "again once the other apply (or `orch stop`) has ended")

    def holds(self) -> bool:
        """Whether the locks are still ours (never raises: for a stage's own loop)."""
        return self.lock is None or self.lock.lost() is None
