"""`orch apply` of a changed plan to a fleet that serves: a rolling redeploy through the real
router, with orch's own load generator (C=32, closed loop, streaming) running through it the
whole time. Every replica swapped one by one, 0 failed requests, roll.json says each swap; a
new version that fails at start-up is rolled back on the first replica, the roll stops, the
others keep the previous version, the fleet keeps serving and the run says what happened."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fixtures import quick_venv
from fixtures.fleet import BackgroundLoad
from fixtures.fleet_plans import chat, fleet_plan
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_ports

pytestmark = pytest.mark.slow
LOAD = 32


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    top = tmp_path_factory.mktemp("fleet-roll")
    port = free_ports(3)
    plan = fleet_plan(top / "fleet.yaml", venv=str(top / "venv"),
                      interpreter=quick_venv.interpreter(), hosts="localhost", port=port,
                      name=f"fr{top.name[-6:]}", replicas={"per_host": 3, "gpus": 1})
    first = orch("apply", plan, "--skip", "bench", cwd=top, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    record = json.loads((last_run(top) / "fleet.json").read_text())
    yield {"dir": top, "plan": plan, "router": record["router"]["url"],
           "urls": [f"http://127.0.0.1:{p}" for p in (port, port + 1, port + 2)]}
    orch("stop", plan, cwd=top)


def _versions(urls: list[str]) -> list[str]:
    return [httpx.get(f"{url}/version", timeout=10).json()["version"] for url in urls]


def test_a_changed_plan_rolls_replica_by_replica_without_a_failed_request(
        fleet: dict[str, Any]) -> None:
    assert _versions(fleet["urls"]) == ["0.17.1"] * 3
    with BackgroundLoad(fleet["router"], LOAD) as load:
        done = orch("apply", fleet["plan"], "--skip", "bench",
                    "--set", "service.sim.vllm_version=0.32.0", cwd=fleet["dir"], timeout=600)
        load.finish()
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert load.failed() == [], [(r.error_kind, r.error) for r in load.failed()[:5]]
    assert load.completed() > LOAD, load.completed()  # it served throughout
    run = last_run(fleet["dir"])
    roll = json.loads((run / "roll.json").read_text())
    assert roll["outcome"] == "done" and roll["stopped_by"] is None
    assert [s["replica"] for s in roll["swaps"]] == [f"localhost-r{i}" for i in range(3)]
    assert all(s["outcome"] == "swapped" for s in roll["swaps"]), roll["swaps"]
    assert [(s["before"], s["after"]) for s in roll["swaps"]] == [("0.17.1", "0.32.0")] * 3
    assert _versions(fleet["urls"]) == ["0.32.0"] * 3
    assert json.loads((run / "fleet.json").read_text())["state"] == "ready"


def test_a_new_version_that_fails_is_rolled_back_and_the_roll_stops(
        fleet: dict[str, Any]) -> None:
    before = _versions(fleet["urls"])
    with BackgroundLoad(fleet["router"], LOAD) as load:
        done = orch("apply", fleet["plan"], "--skip", "bench",
                    "--set", "service.sim.vllm_version=0.32.0",
                    "--set", "service.sim.fail_at_startup=cuda-oom", cwd=fleet["dir"],
                    timeout=600)
        load.finish()
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "the roll stopped at localhost-r0" in said
    assert load.failed() == [], [(r.error_kind, r.error) for r in load.failed()[:5]]
    run = last_run(fleet["dir"])
    roll = json.loads((run / "roll.json").read_text())
    assert (roll["outcome"], roll["stopped_by"]) == ("stopped", "localhost-r0")
    assert roll["untouched"] == ["localhost-r1", "localhost-r2"]
    assert roll["swaps"][0]["outcome"] == "restored", roll["swaps"][0]
    assert _versions(fleet["urls"]) == before  # the first back on its version, the others untouched
    assert chat(fleet["router"]) == 200
    record = json.loads((run / "fleet.json").read_text())
    assert record["state"] == "ready" and len(record["router"]["workers"]) == 3
