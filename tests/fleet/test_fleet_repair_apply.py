"""A replica killed while `orch apply` sweeps through the fleet's router: the level names it
(its failed requests as the router counted them), and the router's run relaunches it and
registers it again after the sweep (its `repair` stage), so the fleet serves whole."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import httpx
import pytest
import yaml
from fixtures import quick_venv
from fixtures.fleet import wait_for
from fixtures.fleet_plans import chat, counters, fleet_plan
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_ports

from orchestrator.errors import OrchError
from orchestrator.router_client import RouterClient

pytestmark = pytest.mark.slow


def _running(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("vllm:num_requests_running"))


def test_a_replica_killed_under_the_sweep_is_named_relaunched_and_registered_again(
        tmp_path: Path) -> None:
    port = free_ports(3)
    name = f"fk{tmp_path.name[-6:]}"
    plan = fleet_plan(tmp_path / "fleet.yaml", venv=str(tmp_path / "venv"),
                      interpreter=quick_venv.interpreter(), hosts="localhost", port=port,
                      name=name, replicas={"per_host": 3, "gpus": 1})
    victim = f"http://127.0.0.1:{port + 1}"
    pidfile = tmp_path / "venv" / ".orch" / "service" / f"{name}-sim-r1" / "pid"
    killed: list[int] = []

    metrics = f"http://127.0.0.1:{yaml.safe_load(plan.read_text())['router']['metrics_port']}"

    def kill_when_busy() -> None:  # once the sweep's streams, sent by the router, run on it
        wait_for(lambda: pidfile.is_file() and _routed(metrics, victim) and _busy(victim), 300,
                 "the victim serving the sweep")
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    try:
        done = orch("apply", plan, "--set", "bench.concurrency=[6]",
                    "--set", "bench.requests_per_level=30", "--set", "bench.max_tokens=2000",
                    "--set", "bench.max_failed_fraction=1", cwd=tmp_path, timeout=600)
        killer.join(30)
        said = done.stdout + done.stderr
        assert killed, said
        run = last_run(tmp_path)
        record = json.loads((run / "fleet.json").read_text())
        router = record["router"]["host"]
        level = json.loads((run / "hosts" / router / "bench" / "level-c6.json").read_text())
        rows = {row["url"]: row for row in level["router"]["replicas"]}
        assert rows[victim]["failed"] >= 1, rows[victim]  # named: its failed attempts
        steps = {s["step"]: s for s in json.loads(
            (run / "hosts" / router / "steps.json").read_text())["steps"]}
        assert steps["repair"]["status"] == "changed", steps["repair"]
        assert "localhost-r1 relaunched" in said, said
        assert done.returncode == 0, said
        assert record["state"] == "ready" and victim in record["router"]["workers"]
        assert httpx.get(f"{victim}/health", timeout=5).status_code == 200
        _, before = counters(record)
        assert [chat(record["router"]["url"]) for _ in range(6)] == [200] * 6
        _, after = counters(record)
        assert after.minus(before).processed.get(victim, 0) >= 1, after  # routed to again
    finally:
        orch("stop", plan, cwd=tmp_path)


def _routed(metrics: str, url: str) -> bool:
    """The router has sent `url` requests: the sweep is under way (not readiness, smoke)."""
    try:
        with RouterClient(metrics, metrics) as client:
            return client.counters().processed.get(url, 0.0) > 0
    except OrchError:
        return False


def _busy(url: str) -> bool:
    try:
        return _running(url) > 0
    except httpx.HTTPError:
        return False
