"""The rolling redeploy through real parts: the real vllm-router in front of three real
simulator replicas, orch's own load generator streaming chat through the router at C=32
during the whole roll, each replica swapped by restarting its process on the same port
with another `--vllm-version` (or a start-up failure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.fleet import BackgroundLoad, RouterProcess, SimFleet, sim_fleet, wait_for

from orchestrator.events import Event
from orchestrator.fleet.events import RollStep
from orchestrator.fleet.member import Member
from orchestrator.fleet.records import ROLL_FILE, RollRecord
from orchestrator.fleet.roll import RollOptions, roll
from orchestrator.fleet.watch import FleetWatch
from orchestrator.router_client import RouterClient

pytestmark = pytest.mark.slow
# model time as the profile says (not the tests' usual 1/1000): a 64-token answer streams
# for a few hundred ms, so a replica leaving the router has requests to finish
SIM = {"profile": "tiny-qwen2-vllm-cpu-2-cores", "time_scale": 1.0, "vllm_version": "0.1.0"}
MAX_TOKENS = 64
DRAINED = RollOptions()  # max_unavailable 1, drain up to 300 s
C = 32


def _roll_under_load(tmp_path: Path, fleet: SimFleet, options: RollOptions = DRAINED
                     ) -> tuple[RollRecord, BackgroundLoad, list[Event], dict[str, int]]:
    router = RouterProcess(tmp_path / "router.log", [m.url for m in fleet.members])
    said: list[Event] = []
    try:
        with RouterClient(router.url, router.metrics_url) as client, \
                BackgroundLoad(router.url, C, MAX_TOKENS) as load:
            wait_for(lambda: load.completed() >= 3 * C, 60, "the load is flowing")
            before = load.completed()
            record = roll(fleet.members, client, fleet, options=options,
                          emit=said.append, folder=tmp_path)
            during = load.completed() - before
            wait_for(lambda: load.completed() >= before + during + C, 60, "the load goes on")
            load.finish()
            figures = {"during": during, "failed": len(load.failed()),
                       "total": load.completed()}
            assert load.stopped == "finished", load.stopped
    finally:
        router.stop()
    return record, load, said, figures


def test_a_roll_under_c32_swaps_every_replica_without_a_failed_request(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        fleet.next = {rid: {"vllm_version": "0.2.0"} for rid in "abc"}
        record, load, said, figures = _roll_under_load(tmp_path, fleet)
        print(f"\nroll figures: {figures}")
        for swap in record.swaps:
            print(f"  {swap.replica}: {swap.phases} drained {swap.drained}")
        assert figures["failed"] == 0, [(r.error_kind, r.error_message) for r in load.failed()]
        assert record.outcome == "done" and record.untouched == []
        assert [(s.replica, s.outcome, s.before, s.after) for s in record.swaps] == [
            (rid, "swapped", "0.1.0", "0.2.0") for rid in "abc"]
        assert [fleet.version(m) for m in fleet.members] == ["0.2.0"] * 3
        # each replica had requests of its own when it left the router, and let them finish
        assert all(s.drained and s.drained.in_flight > 0 and not s.drained.timed_out
                   and s.drained.left == 0 for s in record.swaps)
        assert all(list(s.phases) == ["remove", "drain", "update", "ready", "smoke", "add"]
                   for s in record.swaps)
        assert figures["during"] > C  # the fleet served throughout
        written = json.loads((tmp_path / ROLL_FILE).read_text())
        assert [s["outcome"] for s in written["swaps"]] == ["swapped"] * 3
        steps = [e.step for e in said if isinstance(e, RollStep) and e.replica == "b"]
        assert steps == ["draining", "updating", "ready", "smoke ok", "back in"]


def test_a_new_version_that_fails_is_restored_and_stops_the_roll(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        fleet.next = {"a": {"vllm_version": "0.2.0"},
                      "b": {"vllm_version": "0.2.0", "fail_at_startup": "cuda-oom"},
                      "c": {"vllm_version": "0.2.0"}}
        record, load, said, figures = _roll_under_load(tmp_path, fleet)
        print(f"\nroll figures: {figures}")
        assert record.outcome == "stopped" and record.stopped_by == "b"
        a, b = record.swaps
        assert (a.replica, a.outcome, a.after) == ("a", "swapped", "0.2.0")
        assert (b.replica, b.outcome, b.failed_at, b.before, b.after) == (
            "b", "restored", "ready", "0.1.0", "0.1.0")
        assert "exited" in (b.error or "") and "restore" in b.phases
        assert record.untouched == ["c"]
        assert [fleet.version(m) for m in fleet.members] == ["0.2.0", "0.1.0", "0.1.0"]
        # b was out of the router before its failed start: no request ever met it
        assert figures["failed"] == 0, [(r.error_kind, r.error_message) for r in load.failed()]
        steps = [e.step for e in said if isinstance(e, RollStep) and e.replica == "b"]
        assert steps == ["draining", "updating", "not ready", "restoring", "back in"]
        written = json.loads((tmp_path / ROLL_FILE).read_text())
        assert written["outcome"] == "stopped" and written["untouched"] == ["c"]


def test_without_the_drain_the_update_cuts_the_streams_in_flight(tmp_path: Path) -> None:
    """The control: the same roll with no time to drain fails the requests the replica had
    (the simulator, as vLLM, ends its streams when stopped): the drain is what saves them."""
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        fleet.next = {rid: {"vllm_version": "0.2.0"} for rid in "abc"}
        record, _, _, figures = _roll_under_load(tmp_path, fleet,
                                                 RollOptions(drain_timeout_s=0.0))
        print(f"\nroll figures: {figures}")
        assert record.outcome == "done"
        assert all(s.drained and s.drained.timed_out for s in record.swaps)
        assert figures["failed"] > 0


def _most_out_at_once(record: RollRecord) -> int:
    """From the record: how many replicas were out of the router at the same moment."""
    spans = [(s.started, s.started + sum(s.phases.values())) for s in record.swaps]
    return max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)


@pytest.mark.parametrize("asked, expected", [(2, 2), (5, 2)])
def test_max_unavailable_swaps_that_many_at_once_and_keeps_one_serving(
        tmp_path: Path, asked: int, expected: int) -> None:
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        fleet.next = {rid: {"vllm_version": "0.2.0"} for rid in "abc"}
        record, load, _, figures = _roll_under_load(tmp_path, fleet,
                                                    RollOptions(max_unavailable=asked))
        print(f"\nroll figures (max_unavailable {asked}): {figures}")
        assert record.outcome == "done" and record.max_unavailable == expected
        assert _most_out_at_once(record) == expected
        assert figures["failed"] == 0, [(r.error_kind, r.error_message) for r in load.failed()]
        assert [fleet.version(m) for m in fleet.members] == ["0.2.0"] * 3


def test_a_new_version_that_fails_its_smoke_is_restored_too(tmp_path: Path) -> None:
    """It starts and answers /health, but under another model name: the smoke's chat to the
    plan's model fails, and it never goes back into the router as it is."""
    with sim_fleet(tmp_path, 3, **SIM) as fleet:
        fleet.next = {"a": {"vllm_version": "0.2.0", "served_model_name": "other"}}
        record, _, said, figures = _roll_under_load(tmp_path, fleet)
        (a,) = record.swaps
        assert (a.outcome, a.failed_at, a.after) == ("restored", "smoke", "0.1.0")
        assert a.problems and "other" in a.problems[0]
        assert record.untouched == ["b", "c"] and figures["failed"] == 0
        steps = [e.step for e in said if isinstance(e, RollStep) and e.replica == "a"]
        assert steps == ["draining", "updating", "ready", "smoke failed", "restoring", "back in"]


class _InterruptedAt(SimFleet):
    """The apply is stopped (Ctrl-C) as it begins to update `at`."""

    at = "b"

    def update(self, member: Member) -> None:
        if member.id == self.at:
            raise KeyboardInterrupt
        super().update(member)


def test_an_interrupted_roll_says_so_and_reconcile_puts_the_replica_back(
        tmp_path: Path) -> None:
    fleet = _InterruptedAt(tmp_path, 3, **SIM)
    fleet.next = {rid: {"vllm_version": "0.2.0"} for rid in "abc"}
    router = RouterProcess(tmp_path / "router.log", [m.url for m in fleet.members])
    try:
        with RouterClient(router.url, router.metrics_url) as client:
            with pytest.raises(KeyboardInterrupt):
                roll(fleet.members, client, fleet, folder=tmp_path)
            written = json.loads((tmp_path / ROLL_FILE).read_text())
            assert (written["outcome"], written["untouched"]) == ("interrupted", ["c"])
            assert [(s["replica"], s["outcome"]) for s in written["swaps"]] == [
                ("a", "swapped"), ("b", "interrupted")]
            assert list(written["swaps"][1]["phases"]) == ["remove", "drain", "update"]
            assert fleet.member("b").url not in client.workers()
            assert FleetWatch(client).reconcile(fleet.members).registered == ["b"]
            assert [fleet.version(m) for m in fleet.members] == ["0.2.0", "0.1.0", "0.1.0"]
    finally:
        router.stop()
        fleet.close()
