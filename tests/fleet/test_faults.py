"""Faults through real parts: a replica killed under load, a roll interrupted with a
replica out of the router, the router itself killed and started again empty; and what
`FleetWatch.reconcile` repairs of each (and what the router repairs on its own)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fixtures.fleet import BackgroundLoad, RouterProcess, sim_fleet, wait_for

from orchestrator.events import Event
from orchestrator.fleet.drain import replica_in_flight
from orchestrator.fleet.events import FleetRepair
from orchestrator.fleet.watch import FleetWatch
from orchestrator.router_client import RouterClient

pytestmark = pytest.mark.slow
SIM = {"profile": "tiny-qwen2-vllm-cpu-2-cores", "time_scale": 1.0}
HEALTH = ["--health-check-interval-secs", "1"]  # it takes a worker back within seconds


def _chat(url: str) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code


def test_a_replica_killed_under_load_costs_only_its_streams(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        router = RouterProcess(tmp_path / "router.log", [m.url for m in fleet.members], HEALTH)
        c = fleet.member("c")
        try:
            with RouterClient(router.url, router.metrics_url) as client, \
                    BackgroundLoad(router.url, 32, max_tokens=64) as load:
                watch = FleetWatch(client)
                wait_for(lambda: load.completed() >= 96, 60, "the load is flowing")
                wait_for(lambda: (replica_in_flight(c.url) or 0) > 0, 30, "c is busy")
                fleet.sims["c"].process.kill()
                fleet.sims["c"].process.wait()
                after_kill = load.completed()
                wait_for(lambda: load.completed() >= after_kill + 96, 60, "the load goes on")
                assert client.workers().count(c.url) == 1  # the router keeps a dead worker
                down = watch.reconcile(fleet.members)
                assert down.listed_down == ["c"] and down.registered == []
                fleet.relaunch("c")  # its supervision's work
                assert client.counters().circuit[c.url] != 0  # open: c gets nothing for 60 s
                back = watch.reconcile(fleet.members)
                before = client.counters().processed.get(c.url, 0.0)
                wait_for(lambda: client.counters().processed.get(c.url, 0.0) > before, 10,
                         "the router sends c requests again")
                assert watch.reconcile(fleet.members).complete
                load.finish()
            failed = load.failed()
            print(f"\nkilled c under C=32: {len(failed)} failed of {load.completed()}"
                  f" ({sorted({r.error_kind for r in failed})})")
            # only streams c had begun are lost: each failure had its answer's head already
            assert 0 < len(failed) <= 32 and all(r.headers_ns for r in failed)
            assert (back.present, back.reset, back.registered) == (["a", "b"], ["c"], [])
            assert watch.re_registered == {"c": 1}
        finally:
            router.stop()


def test_reconcile_puts_back_a_replica_an_interrupted_roll_left_out(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        router = RouterProcess(tmp_path / "router.log", [m.url for m in fleet.members], HEALTH)
        try:
            with RouterClient(router.url, router.metrics_url) as client:
                said: list[Event] = []
                watch = FleetWatch(client, emit=said.append)
                assert client.remove(fleet.member("b").url)[0]  # the roll stopped here
                first = watch.reconcile(fleet.members)
                assert (first.registered, first.present) == (["b"], ["a", "c"])
                assert sorted(client.workers()) == sorted(m.url for m in fleet.members)
                again = watch.reconcile(fleet.members)
                assert again.registered == [] and again.complete
                assert watch.re_registered == {"b": 1}
                assert [(e.replica, e.status) for e in said if isinstance(e, FleetRepair)] == [
                    ("b", "changed")]
        finally:
            router.stop()


def test_a_router_started_again_empty_gets_every_replica_back(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        router = RouterProcess(tmp_path / "router.log", [m.url for m in fleet.members], HEALTH)
        try:
            with RouterClient(router.url, router.metrics_url) as client:
                watch = FleetWatch(client)
                assert [_chat(router.url) for _ in range(6)] == [200] * 6
                assert watch.reconcile(fleet.members).complete
                router.kill()
                assert watch.reconcile(fleet.members).router_down is not None
                router.restart()  # its supervision's work: the same command, no worker
                assert client.workers() == []
                done = watch.reconcile(fleet.members)
                assert done.router_back and done.registered == ["a", "b", "c"]
                assert watch.router_restarts == 1
                assert [_chat(router.url) for _ in range(6)] == [200] * 6
                assert watch.reconcile(fleet.members).registered == []
        finally:
            router.stop()
