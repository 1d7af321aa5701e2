"""A fleet's pure rules: the GPUs a host must hold for its replicas, the router's flags
against its own --help, the gate between the replicas' runs and the router's, the replicas
as inventory hosts, fleet.json's state."""

from __future__ import annotations

import threading

import pytest
from fixtures.service_plans import make_plan

from orchestrator.apply.fleet import Fleet, fleet_exit_code, fleet_record
from orchestrator.engines.router.flags import args_problems, shipped_flags
from orchestrator.exit_codes import ExitCode
from orchestrator.facts import Facts, Gpu, HostFacts
from orchestrator.fleet.gate import ReplicaGate
from orchestrator.fleet.router_service import router_plan
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.plan.replicas import replica_plan, replicas_of
from orchestrator.runs.outcome import HostOutcome, StepOutcome
from orchestrator.service.launch import render_launch
from orchestrator.service.preflight import preflight


def _gpus(count: int) -> Facts:
    return Facts(host=HostFacts(gpus=tuple(Gpu(i, "NVIDIA RTX PRO 6000") for i in range(count))))


@pytest.mark.parametrize(("gpus", "tp", "problem"), [
    (8, 4, None),
    (6, 4, "the fleet puts 2 replica(s) of 4 GPUs on this host (replicas.per_host x "
           "replicas.gpus = 8) but it has 6 GPUs"),
    (8, 8, "each replica has 4 GPUs (replicas.gpus) but the service needs 8 (tensor x "
           "pipeline x data parallel)"),
])
def test_a_host_must_hold_every_replicas_gpu_set(gpus: int, tp: int, problem: str | None) -> None:
    plan = make_plan({"args": {"tensor-parallel-size": tp}},
                     replicas={"per_host": 2, "gpus": 4}, router={})
    second = replica_plan(plan, replicas_of(plan, ["gpu1"])[1])
    errors = [f.message for f in preflight(second, _gpus(gpus)) if f.level == "error"]
    assert errors == ([problem] if problem else [])


@pytest.mark.parametrize(("args", "said"), [
    ({"retry-max-retries": 3, "disable-circuit-breaker": True, "log-level": "debug"}, []),
    ({"polcy": "random"}, ["vllm-router 0.1.17 has no flag --polcy; did you mean router.policy?"]),
    ({"log-level": "loud"}, ["--log-level expects one of debug, info, warning, error, "
                             "critical, got 'loud'"]),
    ({"health-check-interval-secs": "often"},
     ["--health-check-interval-secs expects a number (an integer), got 'often'"]),
    ({"disable-retries": 3}, ["--disable-retries is a switch: write true (or leave it out), "
                              "not a value"]),
    ({"request-timeout-secs": True}, ["--request-timeout-secs needs a value (an integer), "
                                      "not true"]),
    ({"policy": "random"}, ["is set by orch: set router.policy instead"]),
    ({"retry-max-retrys": 2}, ["vllm-router 0.1.17 has no flag --retry-max-retrys; did you "
                               "mean retry-max-retries?"]),
])
def test_router_args_are_checked_against_its_help(args: dict[str, object],
                                                   said: list[str]) -> None:
    assert [p.message for p in args_problems(args, "0.1.17")] == said


def test_the_help_table_knows_every_flag_orch_writes() -> None:
    known = shipped_flags("0.1.17")
    assert known is not None
    plan = make_plan({"engine": "sim", "name": "s"}, router={"mode": "pd", "args": {
        "retry-max-retries": 2}}, replicas={"prefill": 1}, python={"venv": "/v"})
    argv = render_launch(router_plan(plan, "/r", "orch-router", [("prefill", "http://a:1"),
                                                                  ("decode", "http://b:2")]),
                         venv_bin="/r/bin").argv
    assert argv[:5] == ["/r/bin/vllm-router", "--host", "127.0.0.1", "--port", "30000"]
    flags = [a[2:] for a in argv[1:] if a.startswith("--")]
    assert set(flags) <= set(known), set(flags) - set(known)
    assert argv[argv.index("--vllm-pd-disaggregation"):] == [
        "--vllm-pd-disaggregation", "--prefill", "http://a:1", "--decode", "http://b:2"]


def test_the_router_starts_at_min_ready_and_hears_of_every_later_replica() -> None:
    plan = make_plan({"engine": "sim"}, replicas={"per_host": 3, "gpus": 1}, router={})
    replicas = replicas_of(plan, ["h"])
    gate = ReplicaGate(replicas, min_ready=2)
    started = threading.Event()
    heard: list[str] = []

    def router() -> None:
        assert gate.wait_start()
        started.set()
        heard.extend(r.id for r in gate.as_ready())

    thread = threading.Thread(target=router)
    thread.start()
    gate.ended("h-r1", None)
    assert not started.wait(0.3)  # one of the two it needs
    gate.ended("h-r0", None)
    assert started.wait(10)
    gate.ended("h-r2", "ready: not ready after 60 s")
    thread.join(10)
    assert heard == ["h-r1", "h-r0"] and gate.failed == {"h-r2": "ready: not ready after 60 s"}


def test_too_few_replicas_never_start_the_router() -> None:
    plan = make_plan({"engine": "sim"}, router={})
    gate = ReplicaGate(replicas_of(plan, ["a", "b"]), min_ready=2)
    gate.ended("a", "python: pip failed")
    assert gate.wait_start() is False


def test_replicas_are_hosts_that_connect_as_their_host_does() -> None:
    inventory = Inventory(hosts={"gpu1": HostSpec(address="10.0.0.5", user="u",
                                                  vars={"rack": "r1"})},
                          groups={"fleet": ["gpu1"]})
    plan = make_plan({"engine": "sim", "host": "0.0.0.0"}, hosts="fleet",
                     replicas={"per_host": 2, "gpus": 4}, router={})
    fleet = Fleet.of(plan, inventory.select("fleet"), inventory)
    assert fleet.ids == ["gpu1-r0", "gpu1-r1"]
    spec = fleet.inventory.hosts["gpu1-r1"]
    assert (spec.address, spec.user) == ("10.0.0.5", "u")
    assert fleet.inventory.host_values("gpu1-r1")["name"] == "gpu1"
    assert fleet.inventory.host_values("gpu1-r1")["rack"] == "r1"
    assert fleet.inventory.hosts["orch-router"].connection == "local"
    assert [fleet.url(r) for r in fleet.replicas] == ["http://10.0.0.5:8000",
                                                       "http://10.0.0.5:8001"]


def test_a_fleet_with_a_replica_down_is_degraded_when_min_ready_allows() -> None:
    inventory = Inventory(hosts={h: HostSpec(connection="local") for h in ("a", "b", "c")})
    plan = make_plan({"engine": "sim"}, hosts=["a", "b", "c"], replicas={"min_ready": 2},
                     router={})
    fleet = Fleet.of(plan, ["a", "b", "c"], inventory)
    router = HostOutcome("orch-router", steps=[StepOutcome("ready", "ok"),
                                               StepOutcome("register", "changed")])
    outcomes = [HostOutcome("a"), HostOutcome("b", error="b: connection refused"),
                HostOutcome("c"), router]
    record = fleet_record(fleet, outcomes)
    assert record.state == "degraded"
    assert [(r.id, r.state, r.error) for r in record.replicas] == [
        ("a", "ready", None), ("b", "failed", "b: connection refused"), ("c", "ready", None)]
    assert fleet_exit_code(fleet, record, outcomes, ExitCode.ERROR) == ExitCode.DEGRADED
    swept = HostOutcome("orch-router", steps=[*router.steps, StepOutcome("bench", "failed")])
    serves = fleet_record(fleet, [*outcomes[:3], swept])
    assert serves.state == "degraded"  # it serves; the sweep's failure fails the run
    assert fleet_exit_code(fleet, serves, [*outcomes[:3], swept], ExitCode.ERROR) == \
        ExitCode.ERROR
    gone = [*outcomes[:3], HostOutcome("orch-router", error="no venv")]
    failed = fleet_record(fleet, gone)
    assert failed.state == "failed"
    assert fleet_exit_code(fleet, failed, gone, ExitCode.ERROR) == ExitCode.ERROR
