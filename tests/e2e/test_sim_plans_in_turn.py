"""The shipped simulated plans (plans/sim/*.yaml), applied one after another to one host, as
a user pivots between models: every apply succeeds, each replacing the service the one
before left running on its port (the one-node Ray plan included, and back again).

Only what keeps it short or keeps it to this test is overridden: a small sweep, fast
simulated time, and the test's own venv folder, ports and Ray port (the shipped
venvs under ~/.cache/orch/sim and ports 8000 / 8010 may be in use by a demo); the Ray plan installs
`ray` from the local wheelhouse (tests/fixtures/realpkgs.py). The host is this machine,
reached as the shipped plans reach it (`connection: local`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import alive, orch
from fixtures.ports import free_port

from orchestrator.plan.loader import load_plan

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SHIPPED_VENVS = f"{Path.home()}/.cache/orch/sim"  # ${controller.home}/.cache/orch/sim
# The demo's order, then the Ray plan (the pivot the issue tried: after kimi-int4), the
# vllm-cpu twin beside it (a port of its own, the Ray plan's server left running), back to a
# one-node plan on the Ray plan's port (it replaces that server and its Ray node, although its
# own venv runs the name on the other port), then the matrix; a plan shipped later runs after.
ORDER = ["kimi-nvfp4", "minimax-m2.5", "kimi-int4", "kimi-k2.5-2x8-ray", "vllm-cpu",
         "kimi-nvfp4", "kimi-nvfp4-matrix"]
SHORT = ["bench.concurrency=[1,2]", "bench.requests_per_level=2", "bench.max_tokens=32",
         "bench.warmup=0", "service.sim.time_scale=0.01", "service.sim.startup_time_scale=0.001",
         "health.poll_interval=0.1s"]  # a start of a fraction of a second, seen at once


def plans_in_turn() -> list[Path]:
    """Every shipped simulated plan but a fleet (`router:`: several servers and a router,
    tests/fleet/test_fleet_local.py applies it)."""
    shipped = [p for p in sorted((ROOT / "plans" / "sim").glob("*.yaml"))
               if load_plan(p).plan.router is None]
    names = [p.stem for p in shipped]
    order = [name for name in ORDER if name in names] + \
        [name for name in names if name not in ORDER]
    return [plan(name) for name in order]


def plan(name: str) -> Path:
    return ROOT / "plans" / "sim" / f"{name}.yaml"


class Host:
    """This machine as the plans' one host, with the test's venvs and ports."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.inventory = tmp / "inventory.yaml"
        self.inventory.write_text(yaml.safe_dump({"hosts": {"localhost": {"connection": "local"}}}))
        self.ports: dict[int, int] = {}  # shipped port -> this test's
        self.ray_port = free_port()
        self.applied: list[tuple[Path, list[str]]] = []
        self.name = f"in-turn-{tmp.name[-10:]}"  # the host's service registry is shared

    def sets(self, plan: Path) -> tuple[list[str], Any]:
        resolved = load_plan(plan).plan
        assert resolved.python is not None and resolved.service is not None
        venv = resolved.python.venv
        assert venv.startswith(SHIPPED_VENVS + "/"), venv  # the shipped plans share these
        port = self.ports.setdefault(resolved.service.port, free_port())
        sets = [*SHORT, f"python.venv={self.tmp}{venv.removeprefix(SHIPPED_VENVS)}",
                f"python.interpreter={quick_venv.interpreter()}",
                f"service.port={port}", f"service.name={self.name}"]
        if resolved.service.nodes is not None:
            from fixtures.realpkgs import ray_wheelhouse

            try:
                wheels = ray_wheelhouse()
            except Exception as error:  # no index and no cached wheels: cannot install Ray
                pytest.skip(f"{plan.name} needs the ray wheel, which cannot be had here: {error}")
            sets += [f"install.find_links=[{wheels}]", "install.no_index=true",
                     f"service.nodes.ray_port={self.ray_port}"]
        return sets, resolved

    def orch(self, command: str, plan: Path, sets: list[str], *more: str, timeout: float = 600):
        args = [arg for value in sets for arg in ("--set", value)]
        return orch(command, plan, "-i", self.inventory, *args, *more, cwd=self.tmp,
                    timeout=timeout)

    def server_pid(self, venv: str, name: str) -> int | None:
        pidfile = Path(venv) / ".orch" / "service" / name / "pid"
        return int(pidfile.read_text().split()[0]) if pidfile.exists() else None


def test_the_shipped_simulated_plans_apply_one_after_another(tmp_path: Path) -> None:
    apply_in_turn(Host(tmp_path), plans_in_turn(), ray_node_too=True)


def apply_in_turn(host: Host, plans: list[Path], *, ray_node_too: bool) -> None:
    tmp_path = host.tmp
    running: dict[int, tuple[str, int]] = {}  # port -> (venv, pid) of the service on it
    try:
        for plan in plans:
            sets, resolved = host.sets(plan)
            host.applied.append((plan, sets))
            result = host.orch("apply", plan, sets)
            output = result.stdout + result.stderr
            assert result.returncode == 0, f"{plan.name}:\n{output}"
            assert "Traceback" not in output, output
            venv = f"{tmp_path}{resolved.python.venv.removeprefix(SHIPPED_VENVS)}"
            port = host.ports[resolved.service.port]
            pid = host.server_pid(venv, host.name)
            assert pid is not None and alive(pid), f"{plan.name}: no server running\n{output}"
            before = running.get(port)
            if before is not None and before[1] != pid:  # the pivot replaced the one before
                assert not alive(before[1]), f"{plan.name} left {before} running\n{output}"
                ray = host.server_pid(before[0], f"{host.name}-ray")
                if ray_node_too and before[0] != venv and ray is not None:  # its Ray node
                    assert not alive(ray), f"{plan.name} left the Ray node {ray}\n{output}"
            running[port] = (venv, pid)
    finally:
        for plan, sets in reversed(host.applied):
            host.orch("stop", plan, sets, timeout=120)
