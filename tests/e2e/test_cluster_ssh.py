"""A multi-node server end to end: hosts in network namespaces on one bridge (they reach each
other, as the nodes of a cluster do), each with a private /srv/orch-node and /tmp/ray (its own
venv and Ray session, as on separate machines), over the loopback-free sshd of each; the real
`ray` package from PyPI (through a local wheelhouse: the namespaces reach no index), and the
simulator as the engine, joining the real Ray cluster or vLLM's mp group.

Each test: apply (converge every node, start in order, serve, benchmark), a no-op re-apply
(`orch plan` costs one round trip per host), a killed worker (the server notices and dies,
`orch status` says so, the next apply restarts the group), stop (in the group's order).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import RAY_ARGS, VENV, cluster_fixture, node_path, write_cluster_plan
from fixtures.netns import NetnsHosts
from fixtures.orchcli import last_run, orch, write_inventory

pytestmark = pytest.mark.slow


cluster = cluster_fixture(3, "module")


def pid_of(cluster: NetnsHosts, host: str, service: str) -> int:
    text = node_path(cluster, host, f"{VENV}/.orch/service/{service}/pid").read_text()
    return int(text.split()[0])


def names_of(cluster: NetnsHosts) -> list[str]:
    return [h.name for h in cluster.hosts]


def status(plan: Path, inventory: Path, tmp: Path) -> tuple[int, list[dict[str, Any]]]:
    result = orch("status", plan, "-i", inventory, "--json", cwd=tmp)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else []


def apply(plan: Path, inventory: Path, tmp: Path) -> str:
    result = orch("apply", plan, "-i", inventory, cwd=tmp, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def run_cluster_lifecycle(cluster: NetnsHosts, tmp: Path, name: str, hosts: list[str],
                          nodes: dict[str, Any], args: dict[str, Any], worker_unit: str) -> None:
    inventory = write_inventory(tmp / "inventory.yaml", cluster.inventory(connect_retries=0))
    plan = write_cluster_plan(tmp, name, hosts, nodes, args)
    try:
        apply(plan, inventory, tmp)
        head, workers = hosts[0], hosts[1:]
        run = last_run(tmp)
        for host in hosts:  # every node's log and facts in the one run folder
            assert (run / "hosts" / host / "facts.json").exists()
        assert (run / "hosts" / head / "service.log").exists()
        summary = json.loads(next((run / "hosts" / head / "bench").rglob("summary.json")).read_text())
        assert summary["levels"], summary
        code, rows = status(plan, inventory, tmp)
        assert code == 0, rows
        assert {(r["host"], r["unit"]) for r in rows if r["state"] == "running"} >= {(head, "server")}

        # Converged: `orch plan` costs one round trip per host and finds nothing to do; a
        # re-apply starts nothing.
        marks = cluster.log_marks()
        check = orch("plan", plan, "-i", inventory, "--detailed-exitcode", cwd=tmp)
        assert check.returncode == 0, check.stdout + check.stderr
        assert cluster.round_trips(marks) == {h: 1 for h in hosts} | {
            h: 0 for h in names_of(cluster) if h not in hosts}
        again = apply(plan, inventory, tmp)
        assert "- start" not in again and "- restart" not in again, again

        # A worker dies: the server notices, orch status says so, the next apply recovers.
        victim = workers[-1]
        unit_name = f"{name}-ray" if worker_unit == "ray" else name
        os.killpg(pid_of(cluster, victim, unit_name), signal.SIGKILL)
        for _ in range(120):
            code, rows = status(plan, inventory, tmp)
            if code != 0:
                break
            time.sleep(0.5)
        assert code == 3, rows
        broken = {(r["host"], r["unit"]): r["state"] for r in rows}
        assert broken[(victim, worker_unit)] != "running", broken
        recovered = apply(plan, inventory, tmp)
        starts = [line for line in recovered.splitlines() if "- start " in line or "- restart " in line]
        # Every process of the group starts again: one per node, and the head's server under Ray.
        assert len(starts) == len(hosts) + (worker_unit == "ray"), starts
        if worker_unit == "ray":  # the head's Ray node still ran: it restarts with the group
            assert any("the group restarts" in line for line in starts), starts
        code, rows = status(plan, inventory, tmp)
        assert code == 0, rows
    finally:
        stopped = orch("stop", plan, "-i", inventory, cwd=tmp)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    lines = [line for line in stopped.stdout.splitlines() if "stopped" in line]
    assert lines and lines[0].startswith(f"{hosts[0]}: stopped {name}"), stopped.stdout
    code, rows = status(plan, inventory, tmp)
    assert all(r["state"] == "stopped" for r in rows), rows


def test_three_nodes_on_ray(cluster: NetnsHosts, tmp_path: Path) -> None:
    run_cluster_lifecycle(
        cluster, tmp_path, "ray3", ["n1", "n2", "n3"],
        {"backend": "ray", "ray_args": RAY_ARGS},
        {"tensor-parallel-size": 8, "pipeline-parallel-size": 3}, "ray")


def test_two_nodes_in_vllms_mp_mode(cluster: NetnsHosts, tmp_path: Path) -> None:
    run_cluster_lifecycle(
        cluster, tmp_path, "mp2", ["n1", "n2"], {"backend": "mp"},
        {"tensor-parallel-size": 8, "pipeline-parallel-size": 2}, "headless")
