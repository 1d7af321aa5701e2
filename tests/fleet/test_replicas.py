"""A fleet plan's replicas: names, ports and GPU sets derived from hosts and `replicas:`."""

from __future__ import annotations

import pytest

from orchestrator.plan.models import Plan
from orchestrator.plan.replicas import gpus_needed, replica_plan, replicas_of


def _plan(**fleet: object) -> Plan:
    return Plan.model_validate({
        "name": "fleet", "service": {"engine": "sim", "model": "m", "port": 8100,
                                     "name": "orch-sim"},
        "router": {"policy": "round_robin"}, **fleet})


def test_one_replica_per_host_is_the_plain_plan_on_each_host() -> None:
    plan = _plan()
    found = replicas_of(plan, ["a", "b", "c"])
    assert [(r.id, r.port, r.service, r.gpus) for r in found] == [
        ("a", 8100, "orch-sim", None), ("b", 8100, "orch-sim", None), ("c", 8100, "orch-sim", None)]
    assert replica_plan(plan, found[0]) == plan


def test_several_per_host_get_their_own_port_name_and_gpu_set() -> None:
    plan = _plan(replicas={"per_host": 2, "gpus": 4, "port_step": 10})
    found = replicas_of(plan, ["gpu1"])
    assert [(r.id, r.port, r.service, r.gpus) for r in found] == [
        ("gpu1-r0", 8100, "orch-sim-r0", (0, 1, 2, 3)),
        ("gpu1-r1", 8110, "orch-sim-r1", (4, 5, 6, 7))]
    second = replica_plan(plan, found[1])
    assert second.service is not None and (second.service.port, second.service.name) == (8110, "orch-sim-r1")
    assert second.env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert gpus_needed(plan) == 8


def test_pd_splits_the_replicas_into_prefill_then_decode() -> None:
    plan = _plan(router={"mode": "pd"}, replicas={"prefill": 1})
    found = replicas_of(plan, ["a", "b", "c"])
    assert [r.role for r in found] == ["prefill", "decode", "decode"]
    decode = replica_plan(plan, found[1])
    assert decode.service is not None
    assert decode.service.args["kv-transfer-config"] == {"kv_connector": "NixlConnector",
                                                         "kv_role": "kv_both"}
    assert replica_plan(plan, found[0]).env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"


@pytest.mark.parametrize(("fleet", "words"), [
    ({"replicas": {"per_host": 2}}, "need `gpus:`"),
    ({"router": {"mode": "pd"}}, "replicas.prefill"),
    ({"router": {"policy": "fastest"}}, "round_robin"),
    ({"router": {"args": {"--port": 1}}}, "without dashes"),
])
def test_a_fleet_plan_that_cannot_work_is_refused(fleet: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError) as caught:
        _plan(**fleet)
    assert words in str(caught.value)
