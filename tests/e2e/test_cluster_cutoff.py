"""A worker cut off in the middle of a multi-node apply is failed in the recap, with the
reason, beside the head whose server it took down: never `changed` on the strength of its
start earlier in the run.

Two hosts in network namespaces on one bridge (tests/fixtures/cluster.py), the real `ray`
2.60 and the simulator as the engine (TP8 x PP2 over Ray). Once the head's server is ready,
the worker is cut off in one of two ways:

- its Ray node is killed (SIGKILL to its process group): the host still answers, so the
  worker's run says which process died and collects its log;
- the whole node dies: every process of its namespace is killed, its sshd too, so orch
  loses its connection to the host mid-run: the worker is cut off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from fixtures.cluster import RAY_ARGS, VENV, cluster_fixture, node_path, write_cluster_plan
from fixtures.netns import NetnsHost, NetnsHosts
from fixtures.orchcli import SECRET, last_run, orch, write_inventory

pytestmark = pytest.mark.slow
NAME = "cut2"


# Two nodes shared by the module's tests (the venvs made once), and two fresh ones for the
# test that kills a whole node (its sshd with it).
cluster = cluster_fixture(2, "module")
fresh_cluster = cluster_fixture(2, "function", name="fresh_cluster")


@pytest.fixture
def nodes(request: pytest.FixtureRequest) -> NetnsHosts:
    """The test's two nodes: fresh for `node-killed`, the module's otherwise."""
    fresh = getattr(request, "param", None) == "node-killed"
    return request.getfixturevalue("fresh_cluster" if fresh else "cluster")  # type: ignore[no-any-return]


def kill_ray_node(cluster: NetnsHosts, host: NetnsHost) -> None:
    pid = int(node_path(cluster, host.name, f"{VENV}/.orch/service/{NAME}-ray/pid")
              .read_text().split()[0])
    os.killpg(pid, signal.SIGKILL)


def kill_node(cluster: NetnsHosts, host: NetnsHost) -> None:
    """Everything running on the host, as when the machine goes down: its Ray node, its
    sshd and the session orch holds open."""
    pids = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True,
                          text=True, check=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            continue


def apply_cutting_off(plan: Path, inventory: Path, tmp: Path, cut: object) -> tuple[int, str]:
    """`orch apply`, with `cut()` called when the head's server is ready (the smoke checks
    and the sweep still to come)."""
    command = [sys.executable, "-m", "orchestrator.cli", "apply", str(plan), "-i", str(inventory)]
    env = {**os.environ, "ORCH_E2E_SECRET": SECRET, "COLUMNS": "160"}
    with subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:
        watchdog = threading.Timer(600, process.kill)
        watchdog.start()
        lines: list[str] = []
        try:
            assert process.stdout is not None
            done = False
            for line in process.stdout:
                lines.append(line)
                if not done and line.startswith("n1 ") and " ready " in line and " ok " in line:
                    cut()  # type: ignore[operator]
                    done = True
            code = process.wait()
        finally:
            watchdog.cancel()
    output = "".join(lines)
    assert done, output
    return code, output


def recap(output: str) -> tuple[dict[str, str], str]:
    """host -> its status in the recap table, and the lines under the table."""
    part = output.split("recap", 1)[1]
    rows = {cells[0]: cells[1] for line in part.splitlines() if line.startswith("│")
            for cells in [[c.strip() for c in line.split("│")[1:-1]]]}
    below = part.split("└", 1)[1] if "└" in part else ""
    return rows, " ".join(below.split())


@pytest.mark.parametrize(("how", "nodes"), [("ray-node-killed",) * 2, ("node-killed",) * 2],
                         indirect=["nodes"], ids=["ray-node-killed", "node-killed"])
def test_a_worker_cut_off_mid_apply_fails_in_the_recap_with_its_reason(
    nodes: NetnsHosts, tmp_path: Path, how: str,
) -> None:
    cluster = nodes
    inventory = write_inventory(tmp_path / "inventory.yaml", cluster.inventory(connect_retries=0))
    plan = write_cluster_plan(tmp_path, NAME, ["n1", "n2"], {"backend": "ray", "ray_args": RAY_ARGS},
                              {"tensor-parallel-size": 8, "pipeline-parallel-size": 2})
    data = yaml.safe_load(plan.read_text())  # a sweep long enough to be cut: seconds a level
    data["service"]["sim"].update(time_scale=0.5, startup_time_scale=0.002)
    plan.write_text(yaml.safe_dump(data))
    worker = cluster.hosts[1]
    cut = (lambda: kill_ray_node(cluster, worker)) if how == "ray-node-killed" else \
        (lambda: kill_node(cluster, worker))
    try:
        code, output = apply_cutting_off(plan, inventory, tmp_path, cut)
        assert code == 1, output
        rows, reasons = recap(output)
        assert rows == {"n1": "failed", "n2": "failed"}, output
        run = last_run(tmp_path)
        steps = json.loads((run / "hosts" / "n2" / "steps.json").read_text())
        if how == "ray-node-killed":
            # The host answers: its run names the process that died and keeps its log.
            assert f"n2: node: dropped out of the group: its Ray node (unit {NAME}-ray) died " \
                "during the apply" in reasons, output
            node = next(s for s in steps["steps"] if s["step"] == "node")
            assert node["status"] == "failed" and f"{NAME}-ray" in node["error"]
            assert (run / "hosts" / "n2" / "ray.log").exists()
        else:
            assert "n2: cut off during the apply:" in reasons, output
            assert steps["error"].startswith("n2: cut off during the apply"), steps
        assert "n1: " in reasons, output  # the head's own failure, with its reason
        assert json.loads((run / "meta.json").read_text())["status"] == "failed"
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path, timeout=120)


def test_a_head_ray_node_that_dies_at_start_ends_the_wait_at_once(
    cluster: NetnsHosts, tmp_path: Path,
) -> None:
    """Its GCS port inside the range Ray keeps for its workers (10002-19999): the head's Ray
    node exits at start. The server's wait for the cluster ends at the next poll, naming that
    node and its log's error, instead of waiting out the join timeout for a head that is gone."""
    inventory = write_inventory(tmp_path / "inventory.yaml", cluster.inventory(connect_retries=0))
    plan = write_cluster_plan(tmp_path, NAME, ["n1", "n2"],
                              {"backend": "ray", "ray_args": RAY_ARGS, "ray_port": 16399,
                               "join_timeout": "600s"},
                              {"tensor-parallel-size": 8, "pipeline-parallel-size": 2}, bench=False)
    try:
        started = time.monotonic()
        result = orch("apply", plan, "-i", inventory, cwd=tmp_path, timeout=600)
        took = time.monotonic() - started
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        said = " ".join(output.split())
        assert f"the head's Ray node (unit {NAME}-ray) died before the cluster formed; its log: " \
            "ValueError: Ray component worker_ports is trying to use a port number 16399" in said
        assert "did not form within" not in said
        assert took < 300, took  # the venvs, the start and one poll: not the 600 s join timeout
        rows, reasons = recap(output)
        assert rows["n1"] == "failed" and f"n1: service: start {NAME}: the head's Ray node" in reasons, output
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path, timeout=120)


def test_a_worker_ray_node_that_dies_at_start_ends_the_wait_at_once(
    cluster: NetnsHosts, tmp_path: Path,
) -> None:
    """The worker's node manager port inside the range Ray keeps for its workers: the worker's
    Ray node exits at start, the head's does not. The worker, watching its node while the
    cluster forms, tells the head, whose wait ends at its next poll naming that worker and its
    log's error, instead of waiting out the join timeout for a node that is gone."""
    inventory = cluster.inventory(connect_retries=0)
    ports = {"n1": 0, "n2": 16399}  # 0: Ray picks one
    inventory = inventory.model_copy(update={"hosts": {
        name: spec.model_copy(update={"vars": {**spec.vars, "nm_port": ports[name]}})
        for name, spec in inventory.hosts.items()}})
    inventory_file = write_inventory(tmp_path / "inventory.yaml", inventory)
    plan = write_cluster_plan(tmp_path, NAME, ["n1", "n2"],
                              {"backend": "ray", "join_timeout": "600s",
                               "ray_args": [*RAY_ARGS, "--node-manager-port=${host.nm_port}"]},
                              {"tensor-parallel-size": 8, "pipeline-parallel-size": 2}, bench=False)
    try:
        started = time.monotonic()
        result = orch("apply", plan, "-i", inventory_file, cwd=tmp_path, timeout=600)
        took = time.monotonic() - started
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        said = " ".join(output.split())
        assert f"n2: its Ray node (unit {NAME}-ray) died before the cluster formed; its log: " \
            "ValueError: Ray component worker_ports is trying to use a port number 16399" in said
        assert "did not form within" not in said
        assert took < 300, took  # the venvs, the starts and a few polls: not the 600 s timeout
        rows, reasons = recap(output)
        assert rows == {"n1": "failed", "n2": "failed"}, output
        assert f"n2: node: dropped out of the group: its Ray node (unit {NAME}-ray) died " \
            "during the apply" in reasons, output
    finally:
        orch("stop", plan, "-i", inventory_file, cwd=tmp_path, timeout=120)
