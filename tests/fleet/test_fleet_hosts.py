"""`orch apply` of a fleet over SSH: three replica hosts, network namespaces with an sshd
each and a private /srv/orch-fleet (their own venv and simulator, as separate machines
have), the real `vllm-router` on the controller in front of them. Every replica is
registered at its host's address, a chat through the router is answered, and the router's
own metrics count requests for each; with a host down, the fleet comes up degraded as
`replicas.min_ready: 2` allows, and says so in its exit code, recap and fleet.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.fleet_plans import chat, counters, fleet_plan
from fixtures.netns import NetnsHosts, netns_available
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.ports import free_port

from orchestrator.exit_codes import ExitCode

pytestmark = pytest.mark.slow

ROOT = "/srv/orch-fleet"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsHosts]:
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with NetnsHosts(tmp_path_factory.mktemp("fleet-hosts"), 3, private=(ROOT,)) as made:
        yield made


def _inventory(hosts: NetnsHosts, path: Path) -> Path:
    """n1..n3, and `down`: n3's address on a port nothing listens on (a host that is down)."""
    inventory = hosts.inventory(connect_retries=0)
    gone = inventory.hosts["n3"].model_copy(update={"port": free_port()})
    return write_inventory(path, inventory.model_copy(update={"hosts": {**inventory.hosts,
                                                                         "down": gone}}))


def test_three_hosts_serve_behind_the_router_on_the_controller(hosts: NetnsHosts,
                                                               tmp_path: Path) -> None:
    inventory = _inventory(hosts, tmp_path / "inventory.yaml")
    plan = fleet_plan(tmp_path / "fleet.yaml", venv=f"{ROOT}/venv",
                      interpreter=quick_venv.interpreter(), hosts=["n1", "n2", "n3"],
                      port=8100, name="fleeth", replicas={"per_host": 1}, listen="0.0.0.0")
    try:
        done = orch("apply", plan, "-i", inventory, cwd=tmp_path, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        record = json.loads((last_run(tmp_path) / "fleet.json").read_text())
        urls = [f"http://{h.address}:8100" for h in hosts.hosts]
        assert record["state"] == "ready"
        assert [(r["id"], r["url"]) for r in record["replicas"]] == [
            (h.name, f"http://{h.address}:8100") for h in hosts.hosts]
        workers, before = counters(record)
        assert sorted(workers) == sorted(urls) == sorted(record["router"]["workers"])
        assert all(before.processed.get(url, 0) > 0 for url in urls), before.processed
        assert [chat(record["router"]["url"]) for _ in range(3)] == [200] * 3
        counted = counters(record)[1].minus(before)
        assert {url: counted.processed.get(url) for url in urls} == dict.fromkeys(urls, 1.0)
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path)


def test_a_host_down_leaves_the_fleet_degraded_as_min_ready_allows(hosts: NetnsHosts,
                                                                  tmp_path: Path) -> None:
    inventory = _inventory(hosts, tmp_path / "inventory.yaml")
    plan = fleet_plan(tmp_path / "fleet.yaml", venv=f"{ROOT}/venv",
                      interpreter=quick_venv.interpreter(), hosts=["n1", "n2", "down"],
                      port=8200, name="fleetd", replicas={"per_host": 1, "min_ready": 2},
                      listen="0.0.0.0")
    try:
        done = orch("apply", plan, "-i", inventory, "--skip", "bench", cwd=tmp_path,
                    timeout=900)
        said = done.stdout + done.stderr
        assert done.returncode == ExitCode.DEGRADED == 4, said
        assert "fleet degraded: 2 of 3 replicas serve (min_ready 2)" in said
        record = json.loads((last_run(tmp_path) / "fleet.json").read_text())
        assert record["state"] == "degraded"
        assert [(r["id"], r["state"]) for r in record["replicas"]] == [
            ("n1", "ready"), ("n2", "ready"), ("down", "failed")]
        ready = [r["url"] for r in record["replicas"][:2]]
        assert sorted(record["router"]["workers"]) == sorted(ready)
        assert sorted(counters(record)[0]) == sorted(ready)
        assert chat(record["router"]["url"]) == 200
        meta = json.loads((last_run(tmp_path) / "meta.json").read_text())
        assert [f["host"] for f in meta["failures"]] == ["down"]
        assert meta["status"] == "complete"  # it serves; fleet.json and failures say how
    finally:
        orch("stop", plan, "-i", inventory, "--limit", "n1,n2", cwd=tmp_path)


def test_the_router_runs_on_a_host_of_the_inventory(hosts: NetnsHosts, tmp_path: Path) -> None:
    """`router.on: n1`: launched and supervised there, listening on its loopback (reached
    from here through SSH forwards), two replicas of n1 registered at n1's address."""
    inventory = _inventory(hosts, tmp_path / "inventory.yaml")
    plan = fleet_plan(tmp_path / "fleet.yaml", venv=f"{ROOT}/venv",
                      interpreter=quick_venv.interpreter(), hosts=["n1"], port=8300,
                      name="fleeton", replicas={"per_host": 2, "gpus": 1}, listen="0.0.0.0")
    data = yaml.safe_load(plan.read_text())
    data["router"]["on"] = "n1"
    plan.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        done = orch("apply", plan, "-i", inventory, cwd=tmp_path, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        run = last_run(tmp_path)
        record = json.loads((run / "fleet.json").read_text())
        n1 = hosts.hosts[0].address
        assert sorted(record["router"]["workers"]) == [f"http://{n1}:8300", f"http://{n1}:8301"]
        assert (run / "hosts" / "fleeton-router" / "bench" / "summary.json").is_file()
        status = orch("status", plan, "-i", inventory, "--json", cwd=tmp_path)
        rows = {row["host"]: row for row in json.loads(status.stdout)}
        assert rows["fleeton-router"]["state"] == "running", rows
        assert rows["fleeton-router"]["health"] == "200", rows
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path)
