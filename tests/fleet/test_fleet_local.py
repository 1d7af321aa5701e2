"""`orch apply` of a fleet on this machine: three simulator replicas on consecutive ports
behind the real `vllm-router` on the controller, through a real apply. Every replica is
registered, a chat through the router is answered, the sweep goes through the router and
its own metrics count requests for each replica; a re-apply changes nothing; `orch status`
has a line per replica and the router; `orch stop` stops them all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures import quick_venv
from fixtures.fleet_plans import chat, counters, fleet_plan
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port, free_ports
from fixtures.router import router_bin

from orchestrator.apply.converge import HostJob
from orchestrator.apply.fleet import Fleet
from orchestrator.apply.fleet_router import RouterRun
from orchestrator.apply.fleet_run import FleetRun
from orchestrator.holder import Holder
from orchestrator.inventory import load_inventory
from orchestrator.plan.loader import load_plan

pytestmark = pytest.mark.slow
SHIPPED = Path(__file__).resolve().parents[2] / "plans" / "sim" / "fleet-kimi-int4.yaml"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    top = tmp_path_factory.mktemp("fleet-local")
    port = free_ports(3)
    plan = fleet_plan(top / "fleet.yaml", venv=str(top / "venv"),
                      interpreter=quick_venv.interpreter(), hosts="localhost", port=port,
                      name=f"fl{top.name[-6:]}", replicas={"per_host": 3, "gpus": 1})
    yield {"dir": top, "plan": plan, "ports": [port, port + 1, port + 2]}
    orch("stop", plan, cwd=top)


def _steps(run: Path, host: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = json.loads((run / "hosts" / host / "steps.json").read_text())["steps"]
    return steps


def test_three_replicas_serve_behind_the_router(fleet: dict[str, Any]) -> None:
    done = orch("apply", fleet["plan"], cwd=fleet["dir"], timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    run = last_run(fleet["dir"])
    record = json.loads((run / "fleet.json").read_text())
    urls = [f"http://127.0.0.1:{p}" for p in fleet["ports"]]
    assert record["state"] == "ready"
    assert [(r["id"], r["url"], r["state"]) for r in record["replicas"]] == [
        (f"localhost-r{i}", url, "ready") for i, url in enumerate(urls)]
    assert sorted(record["router"]["workers"]) == urls
    router = record["router"]["host"]
    assert sorted(p.name for p in (run / "hosts").iterdir()) == sorted([
        "localhost-r0", "localhost-r1", "localhost-r2", router])
    assert (run / "hosts" / router / "bench" / "summary.json").is_file()  # swept through it
    assert "fleet ready: 3 of 3 replicas serve" in said
    workers, before = counters(record)
    assert sorted(workers) == urls
    assert all(before.processed.get(url, 0) > 0 for url in urls), before.processed  # the sweep
    assert chat(record["router"]["url"]) == 200
    _, after = counters(record)
    assert after.minus(before).requests == 1


def test_a_reapply_of_the_unchanged_fleet_changes_nothing(fleet: dict[str, Any]) -> None:
    done = orch("apply", fleet["plan"], "--skip", "bench", cwd=fleet["dir"], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run = last_run(fleet["dir"])
    record = json.loads((run / "fleet.json").read_text())
    for host in [*(r["id"] for r in record["replicas"]), record["router"]["host"]]:
        changed = [s["step"] for s in _steps(run, host) if s["status"] not in ("ok", "skipped")]
        assert changed == [], (host, changed)
    assert "3 already registered" in done.stdout


def test_status_has_a_line_per_replica_and_the_router(fleet: dict[str, Any]) -> None:
    done = orch("status", fleet["plan"], "--json", cwd=fleet["dir"])
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(done.stdout)
    assert [(r["host"], r["state"], r["health"]) for r in rows][:3] == [
        (f"localhost-r{i}", "running", "200") for i in range(3)]
    assert rows[3]["host"].endswith("-router") and rows[3]["state"] == "running"
    assert rows[3]["workers"] == [f"http://127.0.0.1:{port}" for port in fleet["ports"]]
    assert all(row["workers"] is None for row in rows[:3])
    shown = orch("status", fleet["plan"], cwd=fleet["dir"]).stdout
    assert f"{rows[3]['host']}: 3 worker(s) registered: http://127.0.0.1:{fleet['ports'][0]}" \
        in " ".join(shown.split())


def test_a_run_gives_the_replicas_urls_and_a_client_of_the_running_router(
        fleet: dict[str, Any]) -> None:
    """What a rolling redeploy reads of the fleet: each replica's URL as the router has it,
    and the router itself, reached from here."""
    loaded = load_plan(fleet["plan"])
    made = Fleet.of(loaded.plan, ["localhost"], load_inventory(None))
    run = FleetRun(made, job=_no_job, router=RouterRun(made, False, lambda event: None,
                                                        Holder.me(None, "test")),
                   emit=lambda event: None, forks=None)
    urls = run.urls()
    assert urls == {f"localhost-r{i}": f"http://127.0.0.1:{port}"
                    for i, port in enumerate(fleet["ports"])}
    with run.router_client() as client:
        assert client.health() == 200
        assert sorted(client.workers()) == sorted(urls.values())
        assert set(client.counters().processed) == set(urls.values())


def _no_job(replica: str) -> HostJob:
    raise AssertionError(f"no replica is converged here ({replica})")


def test_the_shipped_fleet_plan_deploys(tmp_path: Path) -> None:
    """plans/sim/fleet-kimi-int4.yaml as shipped, with only what keeps it to this test
    overridden: its venv, ports and names, a short sweep, fast simulated time."""
    port = free_ports(3)
    sets = ["bench.concurrency=[1,3]", "bench.requests_per_level=3", "bench.max_tokens=16",
            "bench.warmup=0", "service.sim.time_scale=0.01",
            "service.sim.startup_time_scale=0.001", f"python.venv={tmp_path}/venv",
            f"python.interpreter={quick_venv.interpreter()}", f"service.port={port}",
            f"service.name=sf{tmp_path.name[-6:]}", f"router.port={free_port()}",
            f"router.metrics_port={free_port()}", f"router.name=sf{tmp_path.name[-6:]}-router",
            f"router.venv={router_bin().parent.parent}"]
    args = [arg for value in sets for arg in ("--set", value)]
    try:
        done = orch("apply", SHIPPED, *args, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        record = json.loads((last_run(tmp_path) / "fleet.json").read_text())
        assert record["state"] == "ready" and len(record["router"]["workers"]) == 3
    finally:
        orch("stop", SHIPPED, *args, cwd=tmp_path)


def test_too_few_replicas_serving_leave_the_router_unstarted(tmp_path: Path) -> None:
    """Every replica dies at start-up (cuda-oom): fewer than min_ready serve, so the router
    is not started, the apply fails and fleet.json says why."""
    plan = fleet_plan(tmp_path / "fleet.yaml", venv=str(tmp_path / "venv"),
                      interpreter=quick_venv.interpreter(), hosts="localhost",
                      port=free_ports(2), name=f"ff{tmp_path.name[-6:]}",
                      replicas={"per_host": 2, "gpus": 1, "min_ready": 1})
    try:
        done = orch("apply", plan, "--set", "service.sim.fail_at_startup=cuda-oom",
                    cwd=tmp_path, timeout=300)
        said = done.stdout + done.stderr
        assert done.returncode == 1, said
        record = json.loads((last_run(tmp_path) / "fleet.json").read_text())
        assert record["state"] == "failed"
        assert [r["state"] for r in record["replicas"]] == ["failed", "failed"]
        assert "cause: the GPUs ran out of memory" in (record["replicas"][0]["error"] or ""), record
        assert "0 of 2 replicas serve, fewer than replicas.min_ready (1): the router is not " \
               "started" in record["router"]["error"]
        assert "fleet failed: 0 of 2 replicas serve" in said
    finally:
        orch("stop", plan, cwd=tmp_path)
