"""The corpus's locks and the service registry (issue 31): lock files that are symlinks, FIFOs,
hard links or folders, folders where orch's own `.orch` folders go, held locks whose file
holds garbage, stale and foreign holders, `--break-lock` with nothing or something to break,
`orch stop` and `orch apply` against each other's lock, and registry entries that are
symlinks, folders, garbage or name a folder that is gone.

Every case runs on this machine (connection local). The venv's lock lives in the case's
folder; the service's lock and registry entry are in the real ~/.orch, under a service name
made from the case's folder, removed again by the case's undo.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fixtures import quick_venv
from hostile.corpus import Case, section

from orchestrator.holder import Holder, controller_id
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.service.lock import HostLock, service_lock_path
from orchestrator.transport import connect

Prepare = Callable[[Path], Callable[[], None] | None]
VICTIM = "victim\n"
OTHER = Holder(user="alice", controller="other-controller", pid=4242, run=None,
               since="2026-12-01T00:00:00+00:00")


def service_name(tmp: Path) -> str:
    """A service name of this case alone (the registry and the service lock are host-wide)."""
    return "corpus-" + hashlib.sha256(str(tmp).encode()).hexdigest()[:12]


def venv_lock(tmp: Path) -> Path:
    return tmp / "v" / ".orch" / "apply-localhost.lock"


def service_lock(tmp: Path) -> Path:
    return Path(os.path.expanduser(service_lock_path(service_name(tmp), "localhost")))


def registry_entry(tmp: Path) -> Path:
    return Path.home() / ".orch" / "services" / service_name(tmp)


def _write_plan(tmp: Path, *, service: bool) -> None:
    lines = ["name: locks", "hosts: localhost",
             f"python: {{venv: {tmp}/v, interpreter: {quick_venv.interpreter()}, installer: pip}}",
             f"files: [{{path: {tmp}/out.conf, content: a}}]"]
    if service:
        lines += [f"service: {{engine: sim, model: m, name: {service_name(tmp)}, port: 1, "
                  "backend: process}", "smoke: []", "bench: null"]
    (tmp / "p.yaml").write_text("\n".join(lines) + "\n")


def plan(*steps: Prepare, service: bool = False) -> Prepare:
    """Write the case's plan, then each of `steps`; undo what they made, last first."""
    def prepare(tmp: Path) -> Callable[[], None]:
        _write_plan(tmp, service=service)
        undos = [undo for step in steps if (undo := step(tmp)) is not None]

        def undo_all() -> None:
            for undo in reversed(undos):
                undo()
            for made in (service_lock(tmp), registry_entry(tmp)):
                if made.is_dir() and not made.is_symlink():
                    made.rmdir()
                elif os.path.lexists(made):  # a file, a symlink, a FIFO
                    made.unlink()
        return undo_all
    return prepare


def victim(tmp: Path) -> None:
    (tmp / "victim").write_text(VICTIM)


def victim_intact(tmp: Path) -> str | None:
    text = (tmp / "victim").read_text()
    return None if text == VICTIM else f"{tmp}/victim now holds {text[:80]!r}"


def lock_is(make: Callable[[Path, Path], None]) -> Prepare:
    """Something orch did not make at the venv's lock file (given it and the case's folder)."""
    def prepare(tmp: Path) -> None:
        victim(tmp)
        venv_lock(tmp).parent.mkdir(parents=True, exist_ok=True)
        make(venv_lock(tmp), tmp)
    return prepare


def dot_orch_is(make: Callable[[Path, Path], None]) -> Prepare:
    """Something orch did not make where the venv's `.orch` folder goes."""
    def prepare(tmp: Path) -> None:
        victim(tmp)
        (tmp / "v").mkdir()
        make(tmp / "v" / ".orch", tmp)
    return prepare


def held(where: Callable[[Path], Path], *, holder: Callable[[], Holder] = lambda: OTHER,
         text: bytes | None = None) -> Prepare:
    """The lock at `where` held by a real lock program, as another apply holds it; `text`
    written over what its file says."""
    def prepare(tmp: Path) -> Callable[[], None]:
        transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
        lock = HostLock(transport, (str(where(tmp)),), holder(), wait=False, break_lock=False,
                        on_wait=lambda who: None)
        lock.acquire()
        if text is not None:
            with open(where(tmp), "r+b") as handle:
                handle.truncate()
                handle.write(text)
        return lock.release
    return prepare


def held_by_a_stranger(tmp: Path) -> Callable[[], None]:
    """The venv's lock flock(2)ed by a process that is not orch's (with a holder's JSON)."""
    path = venv_lock(tmp)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"user": "mallory", "controller": "c", "pid": 1}')
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1]); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)", str(path)],
        stdout=subprocess.PIPE, text=True)
    assert stranger.stdout is not None and stranger.stdout.readline() == "held\n"

    def undo() -> None:
        stranger.kill()
        stranger.wait()
    return undo


def stale_holder() -> Holder:
    """A holder of this controller whose process no longer runs."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return Holder(user="bob", controller=socket.gethostname(), pid=gone.pid, run=None,
                  since="2026-12-01T00:00:00+00:00", controller_id=controller_id())


def registry(make: Callable[[Path, Path], None]) -> Prepare:
    """The service's registry entry made by `make(entry, tmp)`."""
    def prepare(tmp: Path) -> None:
        victim(tmp)
        registry_entry(tmp).parent.mkdir(parents=True, exist_ok=True)
        make(registry_entry(tmp), tmp)
    return prepare


def _garbage_lines(entry: Path, tmp: Path) -> None:
    entry.write_bytes(b"not a folder\n\x1b[31mred\n\xff\xfe\n"
                      + f"{tmp}/gone/.orch/service/{entry.name}\n".encode())


def _hard_link(lock: Path, tmp: Path) -> None:
    os.link(tmp / "victim", lock)


def _stopped_holder() -> Holder:
    return Holder(user="carol", controller="other-controller", pid=77, run=None,
                  since="2026-12-01T00:00:00+00:00", command="stop")


_AT_LOCK = ("localhost:", "apply-localhost.lock")
_AT_TOOK = ("localhost lock warning", "apply-localhost.lock")  # the apply's lock event
_AT_REGISTRY = ("localhost:", "~/.orch/services/corpus-")
APPLY = ["apply", "{tmp}/p.yaml"]
TAKEN = 75  # another holds the lock (docs/cli.md)

CASES = [
    *section("locks and the service registry",
        Case("the apply lock is a symlink to a file outside", APPLY,
             prepare=plan(lock_is(lambda lock, tmp: lock.symlink_to(tmp / "victim"))),
             after=victim_intact, at=_AT_LOCK, says=("is a symlink", "never through a link")),
        Case("the apply lock is a hard link to a file outside", APPLY,
             prepare=plan(lock_is(_hard_link)), after=victim_intact, at=_AT_LOCK,
             says=("not a regular file of its own", "hard link")),
        Case("the apply lock is a FIFO", APPLY, prepare=plan(lock_is(lambda lock, _: os.mkfifo(lock))),
             at=_AT_LOCK, says=("not a regular file of its own",)),
        Case("the apply lock is a folder", APPLY, prepare=plan(lock_is(lambda lock, _: lock.mkdir())),
             at=_AT_LOCK, says=("Is a directory",)),
        Case("the venv's .orch is a file", APPLY,
             prepare=plan(dot_orch_is(lambda dot, _: dot.write_text("x"))),
             at=("localhost:", "/v/.orch"), says=("is not a folder",)),
        Case("the venv's .orch is a symlink to a folder outside", APPLY,
             prepare=plan(dot_orch_is(lambda dot, tmp: dot.symlink_to(tmp))),
             after=lambda tmp: "wrote through .orch" if (tmp / "apply-localhost.lock").exists()
             else None,
             at=("localhost:", "/v/.orch"), says=("is not a folder", "a symlink")),
        Case("a held lock whose file is binary", APPLY,
             prepare=plan(held(venv_lock, text=b"\xff\xfe\x00\x1b[31m" * 50)), code=TAKEN,
             at=_AT_LOCK, says=("a holder orch cannot read", "--break-lock")),
        Case("a held lock whose file is huge", APPLY,
             prepare=plan(held(venv_lock, text=b"x" * (4 * 1024 * 1024))), code=TAKEN,
             at=_AT_LOCK, says=("a holder orch cannot read", "xxx'...)")),
        Case("a held lock whose JSON has the wrong types", APPLY,
             prepare=plan(held(venv_lock, text=b'{"user": [1], "pid": 1e999, "run": {"a": 1}}')),
             code=TAKEN, at=_AT_LOCK, says=("a holder orch cannot read",)),
        Case("a held lock whose holder has terminal controls", APPLY,
             prepare=plan(held(venv_lock, text=b'{"user": "al\\u001b[2Jice", "pid": 5}')),
             code=TAKEN, at=_AT_LOCK, says=("al?[2Jice@?",)),
        Case("--break-lock on a held lock orch cannot read", [*APPLY, "--break-lock"],
             prepare=plan(held(venv_lock, text=b"\x00garbage")), code=0, timeout=180,
             at=_AT_TOOK, says=("took over", "a holder orch cannot read", "(--break-lock)")),
        Case("--break-lock with nothing held", [*APPLY, "--break-lock"], prepare=plan(), code=0,
             timeout=180, at=("localhost",), says=("--break-lock: nothing held",)),
        Case("--break-lock on a lock a stranger holds", [*APPLY, "--break-lock"],
             prepare=plan(held_by_a_stranger), code=TAKEN, at=_AT_LOCK,
             says=("not by an orch lock program", "end that process yourself")),
        Case("a lock whose apply is gone, its lock program alive", APPLY,
             prepare=plan(held(venv_lock, holder=stale_holder)), code=0, timeout=180,
             at=_AT_TOOK, says=("took over", "bob@", "its process no longer runs")),
        Case("--wait --break-lock on a held lock", [*APPLY, "--wait", "--break-lock"],
             prepare=plan(held(venv_lock)), code=0, timeout=180, at=_AT_TOOK,
             says=("took over", "alice@other-controller", "(--break-lock)")),
        Case("--wait on a lock whose apply is gone", [*APPLY, "--wait"],
             prepare=plan(held(venv_lock, holder=stale_holder)), code=0, timeout=180,
             at=_AT_TOOK, says=("took over", "bob@", "its process no longer runs")),
        Case("orch stop while an apply holds the service's lock", ["stop", "{tmp}/p.yaml"],
             prepare=plan(held(service_lock), service=True), code=TAKEN,
             at=("localhost:", "service-corpus-"),
             says=("another apply holds", "alice@other-controller", "--break-lock")),
        Case("orch stop --break-lock while an apply holds the lock",
             ["stop", "{tmp}/p.yaml", "--break-lock"],
             prepare=plan(held(service_lock), service=True), code=0,
             at=("localhost:", "service-corpus-"),
             says=("took over", "alice@other-controller", "was not running")),
        Case("orch apply while orch stop holds the service's lock", APPLY,
             prepare=plan(held(service_lock, holder=_stopped_holder), service=True),
             code=TAKEN, at=("localhost:", "service-corpus-"),
             says=("`orch stop` holds", "carol@other-controller")),
        Case("a registry entry that is a symlink, orch status", ["status", "{tmp}/p.yaml"],
             prepare=plan(registry(lambda entry, tmp: entry.symlink_to(tmp / "victim")),
                          service=True),
             code=3, after=victim_intact, at=_AT_REGISTRY, says=("is a symlink", "orch ignored")),
        Case("a registry entry of garbage lines, orch status", ["status", "{tmp}/p.yaml"],
             prepare=plan(registry(_garbage_lines), service=True), code=3, at=_AT_REGISTRY,
             says=("holds 3 lines that name no state folder",)),
        Case("a registry entry of garbage lines, orch stop", ["stop", "{tmp}/p.yaml"],
             prepare=plan(registry(_garbage_lines), service=True), code=0, at=_AT_REGISTRY,
             says=("was not running", "holds 3 lines that name no state folder")),
        Case("a registry entry that is a FIFO, orch stop", ["stop", "{tmp}/p.yaml"],
             prepare=plan(registry(lambda entry, _: os.mkfifo(entry)), service=True), code=0,
             at=_AT_REGISTRY, says=("is not a regular file",)),
        Case("a registry entry that is a folder, orch plan", ["plan", "{tmp}/p.yaml"],
             prepare=plan(registry(lambda entry, _: entry.mkdir()), service=True),
             at=_AT_REGISTRY, says=("is not a regular file", "remove what stands there")),
        Case("a registry entry naming a folder that is gone, orch status",
             ["status", "{tmp}/p.yaml"],
             prepare=plan(registry(lambda entry, tmp: entry.write_text(
                 f"{tmp}/gone/.orch/service/{entry.name}\n")), service=True),
             code=3, at=("localhost",), says=("stopped",)),
    ),
]
