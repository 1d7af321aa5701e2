"""A service is (host, name): a plan that moves it to another venv replaces the running one
(stopped, its port freed, the new one started) instead of failing on its own port, and
`orch status` / `orch stop` find it whichever venv the plan names. Over a real sshd, with the
simulator as the server (process backend)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import alive, orch, write_inventory
from fixtures.ports import free_port
from fixtures.sshd import SshServer

pytestmark = pytest.mark.slow


@pytest.fixture()
def env(tmp_path: Path, sshd: SshServer) -> Iterator[dict[str, Any]]:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    state: dict[str, Any] = {"tmp": tmp_path, "inventory": inventory, "port": free_port(),
                             "name": f"pivot-{tmp_path.name[-10:]}"}
    yield state
    for venv in ("a", "b"):
        orch("stop", write(state, venv), "-i", inventory, cwd=tmp_path)


def write(state: dict[str, Any], venv: str) -> Path:
    plan = {
        "name": "pivot", "hosts": "all",
        "python": {"venv": str(state["tmp"] / f"venv-{venv}"), "interpreter": quick_venv.interpreter(),
                   "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": state["port"],
                    "backend": "process", "name": state["name"],
                    "sim": {"profile": "instant", "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
    }
    path = state["tmp"] / f"plan-{venv}.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _server_pid(state: dict[str, Any], venv: str) -> int:
    pidfile = state["tmp"] / f"venv-{venv}" / ".orch" / "service" / state["name"] / "pid"
    return int(pidfile.read_text().split()[0])


def test_a_plan_that_moves_the_service_to_another_venv_replaces_it(env: dict[str, Any]) -> None:
    first = orch("apply", write(env, "a"), "-i", env["inventory"], cwd=env["tmp"])
    assert first.returncode == 0, first.stdout + first.stderr
    old = _server_pid(env, "a")

    moved = write(env, "b")
    planned = orch("plan", moved, "-i", env["inventory"], "--detailed-exitcode", cwd=env["tmp"])
    assert planned.returncode == 2, planned.stdout + planned.stderr
    said = " ".join(planned.stdout.split())
    assert f"replace {env['name']} (process; replaces the one started from {env['tmp']}/venv-a)" \
        in said
    assert "already in use" not in said  # its own port is no error
    assert f"~ program: {env['tmp']}/venv-a/bin/orch sim serve -> {env['tmp']}/venv-b/bin/orch " \
        "sim serve" in said, planned.stdout

    second = orch("apply", moved, "-i", env["inventory"], cwd=env["tmp"])
    assert second.returncode == 0, second.stdout + second.stderr
    new = _server_pid(env, "b")
    assert new != old and not alive(old) and alive(new)

    # The old plan's status and stop find the service of that name where it now runs.
    status = orch("status", write(env, "a"), "-i", env["inventory"], "--json", cwd=env["tmp"])
    assert f'"pid": {new}' in status.stdout, status.stdout + status.stderr
    stopped = orch("stop", write(env, "a"), "-i", env["inventory"], cwd=env["tmp"])
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not alive(new)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", env["port"])) != 0  # the port is free
