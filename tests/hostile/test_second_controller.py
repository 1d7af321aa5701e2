"""A second controller with the same hostname (a container, a cloned VM): here a controller
in a PID namespace of its own (`unshare --pid --fork --mount-proc`, as root), where the first
controller's pid does not exist. Its apply must see the first's live lock as held, not as a
dead apply's; and an apply whose lock is taken over during a long stage (its service's
start-up) stops there, naming who took it. Over the loopback sshd, so both controllers'
lock programs run in the host's own namespace, as on a real GPU host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.background import Background
from fixtures.orchcli import orch, write_inventory
from fixtures.ports import free_port
from fixtures.sshd import SshServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                       reason="a PID namespace of its own needs root and unshare(1)"),
]
OWN_PIDS = ["unshare", "--pid", "--fork", "--mount-proc"]  # same hostname, same files


@pytest.fixture()
def plans(tmp_path: Path, sshd: SshServer) -> Iterator[tuple[Path, Path, Path]]:
    """The inventory (host h1 over sshd), a plan whose service starts slowly, and a plan
    of the same venv without a service."""
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    name = f"second-{tmp_path.name[-8:]}-{os.getpid()}"
    python = {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(),
              "installer": "pip"}
    service = tmp_path / "service.yaml"
    service.write_text(yaml.safe_dump({
        "name": "second", "hosts": "all", "python": python,
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "name": name,
                    "sim": {"time_scale": 0.003, "slow_start": 120.0}},
        "health": {"startup_timeout": "300s", "poll_interval": "0.2s"}, "smoke": [],
        "bench": None}))
    files = tmp_path / "files.yaml"
    files.write_text(yaml.safe_dump({
        "name": "files", "hosts": "all", "python": python,
        "files": [{"path": str(tmp_path / "out.conf"), "content": "a\n"}]}))
    yield inventory, service, files
    orch("stop", service, "-i", inventory, "--break-lock", cwd=tmp_path)
    for made in (Path.home() / ".orch" / "services" / name,
                 Path.home() / ".orch" / "locks" / f"service-{name}-h1.lock"):
        made.unlink(missing_ok=True)


def second_controller(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`orch` from a controller in a PID namespace of its own, with this one's hostname."""
    return subprocess.run([*OWN_PIDS, sys.executable, "-m", "orchestrator.cli", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def said(result: subprocess.CompletedProcess[str]) -> str:
    return " ".join((result.stdout + result.stderr).split())


def test_a_controller_of_the_same_hostname_sees_a_live_lock_as_held(
        tmp_path: Path, plans: tuple[Path, Path, Path]) -> None:
    inventory, service, files = plans
    first = Background("apply", service, "-i", inventory, cwd=tmp_path)
    try:
        first.wait_for("startup")  # it holds its locks through the start-up
        second = second_controller("apply", files, "-i", inventory, cwd=tmp_path)
        assert second.returncode == 75, said(second)
        assert "another apply holds" in said(second)
        assert f"(pid {first.process.pid}, `orch apply`, run folder runs/second/" in said(second)
        assert "took over" not in said(second)
        assert not (tmp_path / "out.conf").exists()
        assert first.process.poll() is None  # undisturbed, still starting its service
    finally:
        orch("stop", service, "-i", inventory, "--break-lock", cwd=tmp_path)
        first.end()


def test_an_apply_whose_lock_is_taken_during_start_up_stops_naming_who(
        tmp_path: Path, plans: tuple[Path, Path, Path]) -> None:
    inventory, service, files = plans
    first = Background("apply", service, "-i", inventory, cwd=tmp_path)
    try:
        first.wait_for("startup")
        second = second_controller("apply", files, "-i", inventory, "--break-lock",
                                   cwd=tmp_path)
        assert second.returncode == 0, said(second)
        assert "(--break-lock)" in said(second)
        assert first.end() == 75, first.said  # at its next poll, not after the start-up
    finally:
        first.end()
    assert "this apply's lock was taken over during the start-up" in first.said
    assert "`orch apply`, run folder runs/files/" in first.said  # the one that took it
