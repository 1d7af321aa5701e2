"""What to try, in plan terms: every suggestion, given as `--set 'matrix=<json>'` to a shipped
plan, loads with orch's plan loader and expands (each variant loaded and compiled) as is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orchestrator.engines import engine
from orchestrator.limits.advice import Suggestion, advice
from orchestrator.limits.rules import LIMITERS, Verdict
from orchestrator.matrix.expand import load_matrix
from orchestrator.plan.loader import load_plan

PLANS = Path(__file__).parents[2] / "plans" / "sim"
SHIPPED = ["kimi-nvfp4.yaml", "minimax-m2.5.yaml", "kimi-int4.yaml", "vllm-cpu.yaml"]


def suggestions(plan: Path, name: str, figures: dict[str, float | str | bool] | None = None) -> list[Suggestion]:
    service = load_plan(plan).plan.service
    made, _ = advice(Verdict(name, "high", "test", figures or {}), dict(service.args), tuple(service.extra_args),
                      flags=engine(service.engine).flags)
    return made


@pytest.mark.parametrize("plan", SHIPPED)
@pytest.mark.parametrize("name", LIMITERS)
def test_each_suggestion_loads_and_expands(plan: str, name: str) -> None:
    for suggestion in suggestions(PLANS / plan, name):
        load_plan(PLANS / plan, [], [suggestion.as_set()])
        matrix = load_matrix(PLANS / plan, [], [suggestion.as_set()])
        assert matrix is not None
        assert len(matrix.variants) == max(len(v) for v in suggestion.matrix.values())
        assert yaml.safe_load(suggestion.as_yaml()) == {"matrix": suggestion.matrix}


def axes(plan: str, name: str, figures: dict[str, float | str | bool] | None = None) -> list[dict[str, list[object]]]:
    return [s.matrix for s in suggestions(PLANS / plan, name, figures)]


def test_interconnect_bound_tp8_over_pcie() -> None:
    assert axes("kimi-nvfp4.yaml", "interconnect-bound") == [
        {"service.args.tensor-parallel-size": [4], "service.args.data-parallel-size": [2]},
        {"service.args.enable-expert-parallel": [True]},
    ]


def test_interconnect_bound_already_expert_parallel() -> None:
    assert axes("minimax-m2.5.yaml", "interconnect-bound") == [
        {"service.args.tensor-parallel-size": [2], "service.args.data-parallel-size": [2]}]


def test_scheduler_cap_doubles_and_quadruples() -> None:
    assert axes("kimi-nvfp4.yaml", "scheduler-cap", {"max_num_seqs": 64}) == [
        {"service.args.max-num-seqs": [128, 256]}]


def test_kv_bound_keeps_fp8_and_halves_the_context() -> None:
    assert axes("kimi-nvfp4.yaml", "kv-cache-bound") == [{"service.args.max-model-len": [32768]}]
    cpu = axes("vllm-cpu.yaml", "kv-cache-bound")
    assert {"service.args.kv-cache-dtype": ["fp8"]} in cpu


def test_host_cpu_bound_adds_api_servers() -> None:
    assert axes("vllm-cpu.yaml", "host-cpu-bound") == [{"service.args.api-server-count": [2, 4]}]


@pytest.mark.parametrize("name", ["client-bound", "not-enough-evidence"])
def test_no_server_change_without_a_server_limit(name: str) -> None:
    made, note = advice(Verdict(name, "high", "test"), {"tensor-parallel-size": 8},
                        flags=engine("vllm").flags)
    assert made == []
    assert note


# An SGLang plan's advice, in SGLang's own flags (srt/server_args.py); before, every engine was
# advised vLLM's (`max-num-seqs`, `tensor-parallel-size`), which SGLang refuses.
SGLANG_ARGS = {"tp-size": 8, "max-running-requests": 64, "chunked-prefill-size": 8192,
               "context-length": 65536}
SGLANG_CASES: list[tuple[str, list[dict[str, list[object]]]]] = [
    ("scheduler-cap", [{"service.args.max-running-requests": [128, 256]},
                       {"service.args.chunked-prefill-size": [16384]}]),
    ("kv-cache-bound", [{"service.args.kv-cache-dtype": ["fp8_e4m3"]},
                        {"service.args.context-length": [32768]}]),
    ("interconnect-bound", [{"service.args.tp-size": [4], "service.args.dp-size": [2]},
                            {"service.args.ep-size": [8]}]),
    ("compute-bound", [{"service.args.dp-size": [2]}]),
    ("memory-bandwidth-bound", [{"service.args.kv-cache-dtype": ["fp8_e4m3"]}]),
    ("host-cpu-bound", [{}]),  # no flag for API server processes: said in words
]
VLLM_ONLY = ("max-num-seqs", "max-num-batched-tokens", "tensor-parallel-size", "data-parallel-size",
             "enable-expert-parallel", "max-model-len", "api-server-count")


@pytest.mark.parametrize(("name", "expected"), SGLANG_CASES)
def test_an_sglang_plan_is_advised_in_its_own_flags(name: str, expected: list[dict[str, list[object]]]) -> None:
    made, _ = advice(Verdict(name, "high", "test", {"max_running": 64}), SGLANG_ARGS,
                     flags=engine("sglang").flags)
    assert [s.matrix for s in made] == expected
    said = json.dumps([[s.title, s.matrix] for s in made])
    assert not [flag for flag in VLLM_ONLY if flag in said], said


def test_a_knob_the_engine_lacks_is_said_in_words() -> None:
    (made,), _ = advice(Verdict("host-cpu-bound", "high", "test"), SGLANG_ARGS,
                        flags=engine("sglang").flags)
    assert made.matrix == {} and "has no flag for it" in made.title
    # no plan at all (a server benchmarked by URL): no engine's names are guessed
    made_all, note = advice(Verdict("scheduler-cap", "high", "test", {"max_running": 64}), flags=None)
    assert made_all == [] and "no plan" in note
