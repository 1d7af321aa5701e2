"""The GPU layout, read once (engines/layout.py) in the plan's engine's own flag names by
preflight, the multi-node topology and the report: the same flags give the same GPUs to all
three, and an engine's flags are never read by another engine's names."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fixtures.service_plans import make_plan

from orchestrator.cluster.topology import build
from orchestrator.engines import engine
from orchestrator.errors import PlanError
from orchestrator.report.gpus import gpu_count
from orchestrator.service.preflight import required_gpus

CASES: list[tuple[str, dict[str, Any], list[str], int, int, str]] = [
    # engine, args, extra_args, GPUs per host, GPUs in all, the report's words
    ("vllm", {}, [], 1, 1, ""),
    ("vllm", {"tensor-parallel-size": 8}, [], 8, 8, "TP 8"),
    ("vllm", {}, ["-tp", "8"], 8, 8, "TP 8"),  # the report said 8 and preflight 1 before
    ("vllm", {}, ["--tensor-parallel-size=4", "--pipeline-parallel-size", "2"], 8, 8, "TP 4 x PP 2"),
    ("vllm", {"tensor_parallel_size": "2", "data-parallel-size": 2}, [], 4, 4, "TP 2 x DP 2"),
    ("vllm", {"tensor-parallel-size": 8, "nnodes": 2}, [], 4, 8, "TP 8"),
    ("vllm", {"tensor-parallel-size": 2}, ["-tp", "4"], 4, 4, "TP 4"),  # the later flag wins
    ("vllm", {"data-parallel-size": 4, "data-parallel-size-local": 2}, [], 2, 4, "DP 4"),
    ("vllm", {"data-parallel-size": 4, "enable-expert-parallel": True}, [], 4, 4, "DP 4"),
    ("sim", {"tensor-parallel-size": 8}, [], 8, 8, "TP 8"),  # the simulator speaks vLLM
    # SGLang, by its own names: 1 GPU before (vLLM's names were read for every engine)
    ("sglang", {"tp-size": 8}, [], 8, 8, "TP 8"),
    ("sglang", {"tp_size": 2, "dp-size": 2}, [], 4, 4, "TP 2 x DP 2"),
    ("sglang", {}, ["--tp-size=4", "--pp-size", "2"], 8, 8, "TP 4 x PP 2"),
    ("sglang", {"tensor-parallel-size": 4}, [], 4, 4, "TP 4"),  # its alias of tp-size
    ("sglang", {"tp-size": 16, "nnodes": 2}, [], 8, 16, "TP 16"),
    ("sglang", {"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}, [], 8, 8, "TP 8 x DP 8"),
    ("sglang", {"tp-size": 8, "ep-size": 8}, [], 8, 8, "TP 8, EP 8"),
    ("sglang", {}, ["-tp", "8"], 1, 1, ""),  # vLLM's short spelling is not SGLang's
    ("vllm", {"tp-size": 8}, [], 1, 1, ""),  # nor is SGLang's name vLLM's
]


@pytest.mark.parametrize(("name", "args", "extra", "per_host", "total", "words"), CASES)
def test_one_reading_of_the_layout(name: str, args: dict[str, Any], extra: list[str],
                                   per_host: int, total: int, words: str) -> None:
    found = engine(name).layout(args, extra)
    assert (found.gpus_per_host, found.total_gpus, found.describe()) == (per_host, total, words)
    assert required_gpus(engine(name), args, extra) == per_host
    plan = make_plan({"engine": name, "args": args, "extra_args": extra})
    assert gpu_count(plan, None).count == total


def test_the_topology_reads_extra_args_too_and_refuses_nonsense() -> None:
    common: dict[str, Any] = dict(backend="ray", hosts=["a", "b"], head=None,
                                  addresses={"a": "10.0.0.1", "b": "10.0.0.2"}, gpus_per_node=4,
                                  ray_port=6379, master_port=29501, ray_args=[])
    # SGLang's names, with vLLM's multi-node flags lent (SGLang declares none of its own)
    vllm = engine("vllm")
    sglang = dataclasses.replace(engine("sglang"), multi_node=vllm.multi_node)
    topology = build(args={}, extra_args=["-tp", "8"], engine=vllm, **common)
    assert (topology.tensor, topology.pipeline, topology.gpus_needed_per_node()) == (8, 1, 4)
    with pytest.raises(PlanError, match="tensor-parallel-size must be a positive whole number"):
        build(args={"tensor-parallel-size": "eight"}, engine=vllm, **common)
    topology = build(args={"tp-size": 4, "pp-size": 2}, engine=sglang, **common)  # its own names
    assert (topology.tensor, topology.pipeline, topology.gpus_needed_per_node()) == (4, 2, 4)
    with pytest.raises(PlanError, match="tp-size must be a positive whole number") as caught:
        build(args={"tp-size": "eight"}, engine=sglang, **common)
    assert caught.value.field == "service.args.tp-size"


def test_two_nodes_at_one_address_is_a_plan_error_before_anything_starts() -> None:
    common: dict[str, Any] = dict(backend="ray", hosts=["n1", "n2"], head=None, gpus_per_node=8,
                                  ray_port=6379, master_port=29501, ray_args=[],
                                  args={"tensor-parallel-size": 8, "pipeline-parallel-size": 2},
                                  engine=engine("vllm"))
    with pytest.raises(PlanError, match=r"nodes n1 and n2 share the address 127\.0\.0\.1"):
        build(addresses={"n1": "127.0.0.1", "n2": "127.0.0.1"}, **common)
    build(addresses={"n1": "10.0.0.1", "n2": "10.0.0.2"}, **common)
