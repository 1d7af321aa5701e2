"""One apply at a time per host and venv and per host and service, over the loopback sshd: a
second apply fails at once naming the first (or waits with --wait), also when it puts the same
service in another venv; a lock whose apply died is taken over, and `orch status` shows an
apply of the service in progress. The locks are held by a real program on the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import SECRET, orch, write_inventory
from fixtures.sshd import SshServer
from fixtures.transports import openssh_inventory

from orchestrator.errors import ConnectError, ProbeError
from orchestrator.holder import Holder, controller_id, process_start
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.service.lock import HostLock, lock_path, service_lock_path
from orchestrator.transport import connect

pytestmark = pytest.mark.slow


@pytest.fixture()
def setup(tmp_path: Path, sshd: SshServer) -> tuple[Path, Path, Path]:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "locked", "hosts": "all",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter()},
        "files": [{"path": str(tmp_path / "etc" / "a.conf"), "content": "a\n"}],
    }))
    return tmp_path, inventory, plan


def hold(path: str, holder: Holder) -> HostLock:
    """Take a lock as another apply would (from this machine, which is also the host)."""
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    lock = HostLock(transport, (path,), holder, wait=False, break_lock=False,
                    on_wait=lambda h: None)
    lock.acquire()
    return lock


def other(run: str = "runs/locked/20261201T000000Z-aaaaaaaa") -> Holder:
    return Holder(user="alice", controller="other-controller", pid=4242, run=run,
                  since="2026-12-01T00:00:00+00:00")


def test_a_second_apply_fails_at_once_naming_the_first(setup: tuple[Path, Path, Path]) -> None:
    tmp, inventory, plan = setup
    lock = hold(lock_path(str(tmp / "venv"), "locked", "h1"), other())
    try:
        started = time.monotonic()
        result = orch("apply", plan, "-i", inventory, cwd=tmp)
        assert time.monotonic() - started < 15
        assert result.returncode == 75, result.stdout + result.stderr  # EX_TEMPFAIL: retry later
        said = " ".join(result.stdout.split())
        assert "another apply holds" in said and "alice@other-controller (pid 4242" in said
        assert "runs/locked/20261201T000000Z-aaaaaaaa" in said and "--wait" in said
        assert not (tmp / "etc" / "a.conf").exists()  # nothing was changed
        check = orch("plan", plan, "-i", inventory, "--detailed-exitcode", cwd=tmp)  # no lock
        assert check.returncode == 2, check.stdout + check.stderr
    finally:
        lock.release()
    assert orch("apply", plan, "-i", inventory, cwd=tmp).returncode == 0


def test_wait_waits_for_the_holder_then_applies(setup: tuple[Path, Path, Path]) -> None:
    tmp, inventory, plan = setup
    lock = hold(lock_path(str(tmp / "venv"), "locked", "h1"), other())
    waiting = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "apply", str(plan), "-i", str(inventory), "--wait"],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "ORCH_E2E_SECRET": SECRET, "COLUMNS": "200"},
    )
    lines: list[str] = []
    said_waiting = threading.Event()

    def read() -> None:  # until it says it waits: on a loaded machine it gets there late
        assert waiting.stdout is not None
        for line in waiting.stdout:
            lines.append(line)
            if "waiting for alice@other-controller" in line:
                said_waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert said_waiting.wait(90), "".join(lines)
        assert waiting.poll() is None  # still waiting
        assert not (tmp / "etc" / "a.conf").exists()
    finally:
        lock.release()
    assert waiting.wait(120) == 0, "".join(lines) + (waiting.stderr.read() if waiting.stderr else "")
    reader.join(10)
    assert (tmp / "etc" / "a.conf").read_text() == "a\n"


def test_the_lock_of_a_dead_apply_is_taken_over(setup: tuple[Path, Path, Path]) -> None:
    tmp, inventory, plan = setup
    gone = subprocess.Popen(["true"])
    gone.wait()  # a controller process of this machine that no longer runs
    import socket

    stale = Holder(user="bob", controller=socket.gethostname(), pid=gone.pid, run=None,
                   since="2026-12-01T00:00:00+00:00", controller_id=controller_id())
    lock = hold(lock_path(str(tmp / "venv"), "locked", "h1"), stale)
    try:
        result = orch("apply", plan, "-i", inventory, cwd=tmp)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        lock.release()


@pytest.mark.parametrize("case", ["another-controller-id", "pid-used-again", "no-id"])
def test_only_a_dead_apply_of_this_controller_is_taken_over(
        setup: tuple[Path, Path, Path], case: str) -> None:
    """The hostname is not the controller: a holder of another identity (a container, a
    cloned VM, a PID namespace of its own) or of an older orch (no identity) is never taken
    for dead; one of this identity whose pid another process has now is."""
    tmp, inventory, plan = setup
    import socket

    live = subprocess.Popen(["sleep", "600"])
    mine = controller_id()
    identity = {"another-controller-id": ("f" * 24, process_start(live.pid)),
                "pid-used-again": (mine, "1"),  # its process started at another time
                "no-id": ("", "")}[case]
    holder = Holder(user="bob", controller=socket.gethostname(), pid=live.pid, run=None,
                    since="2026-12-01T00:00:00+00:00", controller_id=identity[0],
                    pid_start=identity[1])
    if case == "another-controller-id":  # its pid gone too: still not this controller's
        live.kill()
        live.wait()
    lock = hold(lock_path(str(tmp / "venv"), "locked", "h1"), holder)
    try:
        result = orch("apply", plan, "-i", inventory, cwd=tmp)
        said = " ".join(result.stdout.split())
        if case == "pid-used-again":
            assert result.returncode == 0, said
            assert "its process no longer runs" in said
        else:
            assert result.returncode == 75, said
            assert f"bob@{socket.gethostname()} (pid {live.pid}" in said
    finally:
        lock.release()
        live.kill()
        live.wait()


def test_break_lock_takes_over_any_holder(setup: tuple[Path, Path, Path]) -> None:
    tmp, inventory, plan = setup
    lock = hold(lock_path(str(tmp / "venv"), "locked", "h1"), other())
    try:
        result = orch("apply", plan, "-i", inventory, "--break-lock", cwd=tmp)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        lock.release()


def test_status_shows_an_apply_in_progress(setup: tuple[Path, Path, Path]) -> None:
    tmp, inventory, _ = setup
    plan = tmp / "service.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "locked", "hosts": "all", "python": {"venv": str(tmp / "venv")},
        "service": {"name": "orch-vllm-locked", "model": "m", "backend": "process", "port": 1},
    }))
    # the service's lock, as an apply of the same service from another venv holds it
    lock = hold(service_lock_path("orch-vllm-locked", "h1"), other())
    try:
        status = orch("status", plan, "-i", inventory, cwd=tmp)
        assert "an apply is in progress: alice@other-controller" in " ".join(status.stdout.split())
        data = orch("status", plan, "-i", inventory, "--json", cwd=tmp)
        rows = json.loads(data.stdout)  # JSON only: the apply in progress is a field
        assert rows[0]["apply"].startswith("alice@other-controller")
    finally:
        lock.release()
    status = orch("status", plan, "-i", inventory, cwd=tmp)
    assert "apply is in progress" not in status.stdout


def test_an_apply_of_the_same_service_from_another_venv_waits_for_the_first(
        setup: tuple[Path, Path, Path]) -> None:
    """A service is (host, name): a plan that moves it to another venv replaces the running
    one, so its apply must not overlap one from the old venv (their venv locks differ)."""
    tmp, inventory, _ = setup
    plan = tmp / "moved.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "moved", "hosts": "all", "python": {"venv": str(tmp / "other-venv")},
        "service": {"name": "orch-vllm-locked", "model": "m", "backend": "process", "port": 1},
    }))
    lock = hold(service_lock_path("orch-vllm-locked", "h1"), other())
    try:
        result = orch("apply", plan, "-i", inventory, cwd=tmp)
        assert result.returncode == 75, result.stdout + result.stderr
        said = " ".join(result.stdout.split())
        assert "another apply holds" in said and "service-orch-vllm-locked-h1.lock" in said
        assert "alice@other-controller (pid 4242" in said
        assert not (tmp / "other-venv" / "bin").exists()  # nothing was installed
    finally:
        lock.release()


def test_break_lock_stops_the_live_apply_it_took_the_lock_from(
        setup: tuple[Path, Path, Path]) -> None:
    """Over SSH: the broken apply's lock program says who took its lock through its channel,
    and that apply stops before its next step rather than change the host beside the other."""
    tmp, inventory, plan = setup
    sleeper = tmp / "sleeper.yaml"
    sleeper.write_text(yaml.safe_dump({
        "name": "sleeper", "hosts": "all",
        "python": {"venv": str(tmp / "venv"), "interpreter": quick_venv.interpreter()},
        # a nap until the test wakes it (once the other apply took the lock), 120 s at most
        "commands": [{"name": "nap", "run": ["sh", "-c", f"touch {tmp}/napping; i=0; while "
                                             f"[ ! -e {tmp}/wake ] && [ $i -lt 1200 ]; do "
                                             "sleep 0.1; i=$((i+1)); done"],
                      "when": "before_launch"}]}))
    first = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "apply", str(sleeper), "-i", str(inventory)],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "ORCH_E2E_SECRET": SECRET, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + 120
        while not (tmp / "napping").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        second = orch("apply", plan, "-i", inventory, "--break-lock", cwd=tmp)
        said = " ".join((second.stdout + second.stderr).split())
        assert second.returncode == 0, said
        assert f"took over {tmp}/venv/.orch/apply-h1.lock from" in said and "(--break-lock)" in said
        assert first.poll() is None, "the first apply ended before its nap did"
        (tmp / "wake").touch()  # the nap ends: the first apply's next step finds its lock taken
        out, _ = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    told = " ".join(out.split())
    assert first.returncode == 75, told
    assert "this apply's lock was taken over after converge" in told
    assert "`orch apply`, run folder runs/locked/" in told  # the apply that took it


def test_the_lock_program_runs_the_probe_once_it_holds_the_locks(tmp_path: Path) -> None:
    """One round trip: the facts come from the program that holds the locks, after it took
    them (a probe that fails is a ProbeError with its traceback's end, the locks still held
    until release)."""
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    path = str(tmp_path / ".orch" / "apply-here.lock")
    program = b"import os\nprint('held' if os.path.exists(%r) else 'no file')\n" % path
    lock = HostLock(transport, (path,), other(), wait=False, break_lock=False,
                    on_wait=lambda h: None, probe=program)
    lock.acquire()
    assert lock.probed(timeout=30) == "held\n"
    assert json.loads(Path(path).read_text())["controller"] == "other-controller"
    lock.release()
    failing = HostLock(transport, (path,), other(), wait=False, break_lock=False,
                       on_wait=lambda h: None, probe=b"raise RuntimeError('no facts here')\n")
    failing.acquire()
    with pytest.raises(ProbeError, match=r"(?s)the fact program failed: .*RuntimeError: no facts here"):
        failing.probed(timeout=30)
    failing.release()


def test_a_fact_program_larger_than_a_pipe_reaches_a_lock_program_that_waits(
        tmp_path: Path) -> None:
    """The lock program reads the fact program before it waits for a held lock: a program
    over a pipe's 64 KiB would otherwise block the controller's write, and the wait would
    never be heard (an `apply --wait` hung so once its facts grew past 64 KiB)."""
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    path = str(tmp_path / ".orch" / "apply-here.lock")
    first = hold(path, other())
    program = b"#" + b"x" * (1 << 20) + b"\nprint('facts')\n"  # 1 MiB: 16 pipes' worth
    heard: list[str] = []
    done: list[str] = []

    def second() -> None:
        def waiting(holder: str) -> None:
            heard.append(holder)
            first.release()  # the first apply ends: the second takes the lock

        lock = HostLock(transport, (path,), Holder.me("runs/x", "apply"), wait=True,
                        break_lock=False, on_wait=waiting, probe=program)
        lock.acquire()
        done.append(lock.probed(timeout=60))
        lock.release()

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    thread.join(timeout=60)
    if thread.is_alive():
        first.release()
    assert not thread.is_alive(), "the controller's write of the fact program never ended"
    assert heard and "alice@other-controller" in heard[0]
    assert done == ["facts\n"]


@pytest.mark.parametrize("client", ["paramiko", "openssh"])
def test_a_host_lost_while_its_lock_program_waits_is_a_connection_error(
        client: str, tmp_path: Path) -> None:
    """The connection, not the lock program, ended the wait: the apply says so (not "the host
    needs python3"), on both SSH clients."""
    path = str(tmp_path / ".orch" / "apply-h1.lock")
    first = hold(path, other())
    sshd = SshServer(tmp_path / "sshd").start()  # its own: this one goes away
    inventory = openssh_inventory(sshd) if client == "openssh" else sshd.inventory(1)
    transport = connect("h1", inventory)
    waits: list[str] = []

    def host_goes_away(holder: str) -> None:
        waits.append(holder)
        sshd.go_away()

    lock = HostLock(transport, (path,), Holder.me("runs/x", "apply"), wait=True,
                    break_lock=False, on_wait=host_goes_away)
    try:
        with pytest.raises(ConnectError, match=r"connection|Connection") as caught:
            lock.acquire()
    finally:
        lock.release()
        transport.close()
        first.release()
        sshd.stop()
    assert waits and "alice" in waits[0]
    assert "python3" not in str(caught.value)
