"""Locks under races (issue 31), with real applies of simulator services on this machine:
`orch stop` against an apply of the service and an apply against a stop, `--break-lock` on a
live apply (which then stops, naming who took its lock), an apply killed with SIGKILL with and
without its lock program, and lock folders orch cannot write (root's permission override
dropped with setpriv, so chmod 000 holds)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.background import Background, until
from fixtures.orchcli import orch
from fixtures.ports import free_port
from fixtures.served import generated_tokens

pytestmark = pytest.mark.slow


_NAMED: list[str] = []  # the service names the tests made: their host-wide files go after


@pytest.fixture(autouse=True)
def _forget_services() -> Iterator[None]:
    yield
    while _NAMED:
        name = _NAMED.pop()
        for made in (Path.home() / ".orch" / "services" / name, service_lock(name)):
            made.unlink(missing_ok=True)


def service_plan(tmp: Path, *, slow_start: float = 0.0, time_scale: float = 0.003,
                 startup_time_scale: float | None = None,
                 bench: dict[str, object] | None = None) -> tuple[Path, str]:
    """A simulator service on this machine (process backend): the plan, the service name."""
    name = f"races-{tmp.name[-10:]}-{os.getpid()}"
    _NAMED.append(name)
    plan = tmp / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "races", "hosts": "localhost",
        "python": {"venv": str(tmp / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "moonshotai/Kimi-K2.5", "served_model_name": "kimi",
                    "host": "127.0.0.1", "port": free_port(), "backend": "process", "name": name,
                    "sim": {"time_scale": time_scale, "slow_start": slow_start,
                            "startup_time_scale": startup_time_scale or time_scale}},
        "health": {"startup_timeout": "120s", "poll_interval": "0.2s"}, "smoke": [],
        "bench": bench}))
    return plan, name


def service_lock(name: str) -> Path:
    return Path.home() / ".orch" / "locks" / f"service-{name}-localhost.lock"


def said(result: subprocess.CompletedProcess[str]) -> str:
    return " ".join((result.stdout + result.stderr).split())


def test_stop_refuses_while_an_apply_starts_the_service_and_waits_with_wait(
        tmp_path: Path) -> None:
    plan, name = service_plan(tmp_path, slow_start=6.0)
    apply = Background("apply", plan, cwd=tmp_path)
    try:
        apply.wait_for("startup")  # the apply holds the service's lock through its start-up
        refused = orch("stop", plan, cwd=tmp_path)
        assert refused.returncode == 75, said(refused)
        assert "another apply holds" in said(refused) and "runs/races/" in said(refused)
        assert "--wait" in said(refused) and "--break-lock" in said(refused)
        stop = Background("stop", plan, "--wait", cwd=tmp_path)
        stop.wait_for("waiting for")
        assert apply.process.poll() is None  # the apply goes on, undisturbed
        assert apply.end() == 0, apply.said  # its start-up was not torn down
        assert stop.end() == 0, stop.said
        assert f"stopped {name}" in stop.said
    finally:
        orch("stop", plan, "--break-lock", cwd=tmp_path)
    status = json.loads(orch("status", plan, "--json", cwd=tmp_path).stdout)
    assert status[0]["state"] == "stopped"


def test_an_apply_started_during_a_stop_is_refused_naming_the_stop(tmp_path: Path) -> None:
    plan, name = service_plan(tmp_path)
    assert orch("apply", plan, cwd=tmp_path).returncode == 0
    pidfile = tmp_path / "venv" / ".orch" / "service" / name / "pid"
    pid = int(pidfile.read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)  # SIGINT waits: the stop holds its lock until SIGCONT
    stop = Background("stop", plan, cwd=tmp_path)
    try:
        until(lambda: '"command": "stop"' in service_lock(name).read_text(), 60)
        refused = orch("apply", plan, cwd=tmp_path)
        assert refused.returncode == 75, said(refused)
        assert "`orch stop` holds" in said(refused) and f"service-{name}-localhost.lock" in \
            said(refused)
    finally:
        os.kill(pid, signal.SIGCONT)
        assert stop.end() == 0, stop.said
    assert f"stopped {name}" in stop.said


def test_stop_break_lock_during_a_sweep_ends_the_apply_and_the_service_stays_stopped(
        tmp_path: Path) -> None:
    """`orch stop --break-lock` while the apply's benchmark runs: the sweep sees its server
    gone and must not relaunch what was stopped; the apply ends (exit 75) naming the stop."""
    # a sweep of seconds a level, after a start-up of a fraction of a second
    plan, name = service_plan(tmp_path, time_scale=0.02, startup_time_scale=0.001, bench={
        "concurrency": [1, 2], "requests_per_level": 200, "warmup": 0, "max_tokens": 64,
        "ignore_eos": True})
    port = yaml.safe_load(plan.read_text())["service"]["port"]
    apply = Background("apply", plan, cwd=tmp_path)
    try:
        until(lambda: generated_tokens(port) > 0 or apply.process.poll() is not None, 180)
        assert generated_tokens(port) > 0, apply.said  # the sweep is under way
        stop = orch("stop", plan, "--break-lock", cwd=tmp_path)
        assert stop.returncode == 0, said(stop)
        assert f"stopped {name}" in said(stop)
        assert apply.end() == 75, apply.said
    finally:
        apply.end()
    assert "relaunch" not in apply.said
    assert "this apply's lock was taken over during the benchmark" in apply.said
    assert "(pid " in apply.said and "`orch stop`)" in apply.said  # who stopped it
    status = json.loads(orch("status", plan, "--json", cwd=tmp_path).stdout)
    assert status[0]["state"] == "stopped", status  # and it stays stopped
    assert generated_tokens(port) == 0


def _sleeping_plan(tmp: Path, seconds: int) -> Path:
    """An apply that naps in a step, holding its lock, until the test touches `wake` (or
    `seconds` pass)."""
    plan = tmp / "sleep.yaml"
    nap = (f"touch {tmp}/napping; for _ in $(seq {seconds * 20}); do "
           f"[ -e {tmp}/wake ] && break; sleep 0.05; done")
    plan.write_text(yaml.safe_dump({
        "name": "sleeper", "hosts": "localhost",
        "python": {"venv": str(tmp / "v"), "interpreter": quick_venv.interpreter()},
        "commands": [{"name": "nap", "run": ["sh", "-c", nap], "when": "before_launch"}]}))
    return plan


def _files_plan(tmp: Path) -> Path:
    plan = tmp / "files.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "files", "hosts": "localhost",
        "python": {"venv": str(tmp / "v"), "interpreter": quick_venv.interpreter()},
        "files": [{"path": str(tmp / "out.conf"), "content": "a\n"}]}))
    return plan


def _holder(tmp: Path) -> dict[str, object]:
    lock = tmp / "v" / ".orch" / "apply-localhost.lock"
    until(lambda: lock.exists() and "host_pid" in lock.read_text(), 120)
    return dict(json.loads(lock.read_text()))


def test_break_lock_on_a_live_apply_stops_that_apply_naming_who_took_it(tmp_path: Path) -> None:
    first = Background("apply", _sleeping_plan(tmp_path, 20), cwd=tmp_path)
    try:
        until(lambda: (tmp_path / "napping").exists(), 120)  # into its long step, locked
        holder = _holder(tmp_path)
        second = orch("apply", _files_plan(tmp_path), "--break-lock", cwd=tmp_path)
        assert second.returncode == 0, said(second)
        assert f"took over {tmp_path}/v/.orch/apply-localhost.lock" in said(second)
        assert f"(pid {holder['pid']}, `orch apply`" in said(second) and "(--break-lock)" in \
            said(second)
        (tmp_path / "wake").touch()  # the first apply's step ends: it finds its lock taken
        assert first.end() == 75, first.said
    finally:
        first.end()
    assert "this apply's lock was taken over after converge" in first.said
    assert f"by {tmp_path}/v/.orch/apply-localhost.lock: " in first.said
    assert "`orch apply`, run folder runs/files/" in first.said  # the one that took it


@pytest.mark.parametrize("program_survives", [False, True], ids=["program-gone", "program-alive"])
def test_an_apply_killed_with_sigkill_leaves_a_lock_the_next_takes(
        tmp_path: Path, program_survives: bool) -> None:
    first = Background("apply", _sleeping_plan(tmp_path, 30), cwd=tmp_path)
    holder = _holder(tmp_path)
    program = int(str(holder["host_pid"]))
    if program_survives:  # as an SSH session the host has not noticed is dead yet
        os.kill(program, signal.SIGSTOP)
    first.process.kill()
    first.end()
    started = time.monotonic()
    second = orch("apply", _files_plan(tmp_path), cwd=tmp_path)
    assert second.returncode == 0, said(second)
    assert time.monotonic() - started < 90
    took = f"took over {tmp_path}/v/.orch/apply-localhost.lock from"
    if program_survives:
        assert took in said(second) and f"(pid {holder['pid']}, `orch apply`" in said(second)
        assert "its process no longer runs" in said(second)
        until(lambda: not Path(f"/proc/{program}").exists() or
              Path(f"/proc/{program}/stat").read_text().split()[2] == "Z", 10)
    else:  # the kernel released it with the program: nothing to take over, nothing to say
        assert took not in said(second)


def _without_override(*args: str | Path, cwd: Path,
                      env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`orch` as root without its power to ignore file permissions (so chmod 000 holds)."""
    return subprocess.run(
        ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", sys.executable, "-m",
         "orchestrator.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
        timeout=120, env={**os.environ, "COLUMNS": "200", **(env or {})})


needs_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["setpriv", "--bounding-set=-dac_override", "true"],
                                        capture_output=True).returncode != 0,
    reason="chmod 000 binds root only without CAP_DAC_OVERRIDE (setpriv, as root)")


@needs_setpriv
def test_a_lock_folder_orch_cannot_write_is_named_with_its_fix(tmp_path: Path) -> None:
    (tmp_path / "v" / ".orch").mkdir(parents=True)
    (tmp_path / "v" / ".orch").chmod(0)
    try:
        result = _without_override("apply", _files_plan(tmp_path), cwd=tmp_path)
    finally:
        (tmp_path / "v" / ".orch").chmod(0o755)
    assert result.returncode == 1, said(result)
    assert "Traceback" not in said(result)
    assert f"localhost: cannot take the lock at {tmp_path}/v/.orch/apply-localhost.lock: " \
        "Permission denied" in said(result)
    assert "make its folder writable" in said(result)
    assert not (tmp_path / "out.conf").exists()


@needs_setpriv
def test_a_service_lock_folder_orch_cannot_write_stops_orch_stop(tmp_path: Path) -> None:
    plan, name = service_plan(tmp_path)
    locks = tmp_path / "home" / ".orch" / "locks"
    locks.mkdir(parents=True)
    locks.chmod(0)
    try:
        result = _without_override("stop", plan, cwd=tmp_path,
                                   env={"HOME": str(tmp_path / "home")})
    finally:
        locks.chmod(0o755)
    assert result.returncode == 1, said(result)
    assert "Traceback" not in said(result)
    assert f"localhost: cannot take the lock at {locks}/service-{name}-localhost.lock: " \
        "Permission denied" in said(result)
    assert not (tmp_path / "venv" / ".orch" / "service" / name / "stopped").exists()


@needs_setpriv
def test_a_registry_orch_cannot_read_blocks_the_start_and_status_says_so(tmp_path: Path) -> None:
    plan, name = service_plan(tmp_path)
    home = tmp_path / "home"
    services = home / ".orch" / "services"
    services.mkdir(parents=True)
    services.chmod(0)
    try:
        planned = _without_override("plan", plan, cwd=tmp_path, env={"HOME": str(home)})
        status = _without_override("status", plan, cwd=tmp_path, env={"HOME": str(home)})
    finally:
        services.chmod(0o755)
    entry = f"the host's registry entry ~/.orch/services/{name}"
    assert planned.returncode == 1 and "Traceback" not in said(planned), said(planned)
    assert f"{entry} (the folders {name} was started from) Permission denied" in said(planned)
    assert "a start could not record itself there" in said(planned)
    assert status.returncode == 3 and "Traceback" not in said(status), said(status)
    assert f"localhost: {entry}" in said(status) and "Permission denied" in said(status)
