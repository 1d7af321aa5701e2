"""The limits joined to a run: what the plan and host facts tell the rules, a level's verdict
as its file keeps it (and an older file's judged on reading), the sweep's plateau and its
words under the table."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from test_limits_rules import SEED_GPU, level_of, sweep

from orchestrator.engines import engine
from orchestrator.limits.verdicts import Judge, plan_facts, plateau_lines, verdict_json, verdict_of
from orchestrator.runs.run_records import LevelResult

TOPO = Path(__file__).parent / "topo"
VLLM = engine("vllm").flags


def test_plan_facts_read_args_extra_args_and_the_topology() -> None:
    facts = plan_facts({"tensor_parallel_size": 4, "max-num-seqs": "64"},
                       ["--max-num-batched-tokens=8192", "--max-num-seqs", "96"],
                       (TOPO / "pcie-8x-l4-phb-sys.txt").read_text(), gpus=8, flags=VLLM)
    assert (facts.max_num_seqs, facts.max_num_batched_tokens, facts.gpus) == (96, 8192, 8)  # extra_args win
    assert facts.links is not None and facts.links.tensor == 4 and facts.links.over_pcie


def test_a_topology_that_does_not_parse_is_left_out_not_guessed() -> None:
    facts = plan_facts({"tensor-parallel-size": 8}, (), "NVIDIA-SMI has failed because it couldn't communicate",
                       flags=VLLM)
    assert facts.links is None and facts.max_num_seqs is None


def test_a_recorded_verdict_is_read_back_and_an_older_level_is_judged_now() -> None:
    busy = level_of({"level": {"client_cpu_utilization": 0.97}})
    judged = Judge().level(busy)
    assert judged["name"] == "client-bound" and judged["figures"]["client_cpu"] == 0.97
    # a file carrying a verdict is not judged again (even if its figures would say otherwise)
    recorded = LevelResult.model_validate({**json.loads(busy.model_dump_json()),
                                           "limiter": {**judged, "name": "compute-bound"}})
    assert verdict_of(recorded).name == "compute-bound"
    assert verdict_of(busy).name == "client-bound"  # no block: judged from the figures
    broken = LevelResult.model_validate({**json.loads(busy.model_dump_json()), "limiter": {"name": 3}})
    assert verdict_of(broken).name == "client-bound"


def test_the_sweep_plateau_names_the_knee_the_limiter_and_what_to_try() -> None:
    curve = {16: 600.0, 32: 800.0, 64: 1100.0, 128: 1140.0}
    gpu = {**SEED_GPU, "sm_active": 0.3, "pcie_rx_mb_s": 3500, "pcie_tx_mb_s": 3500}
    levels = sweep(curve, {64: {"gpu": gpu}, 128: {"gpu": gpu}})
    judge = Judge(plan_facts({"tensor-parallel-size": 8}, (), (TOPO / "pcie-8x-l4-phb-sys.txt").read_text(),
                             flags=VLLM),
                  {"tensor-parallel-size": 8})
    block = judge.sweep(levels, None)
    assert block["says"] == "interconnect-bound from C=64" and block["knee"] == 64
    assert block["limiter"]["confidence"] == "high"
    assert block["levels"] == {"c64": "interconnect-bound", "c128": "interconnect-bound"}
    assert block["try"][0]["matrix"] == {"service.args.tensor-parallel-size": [4],
                                         "service.args.data-parallel-size": [2]}
    assert judge.sweep(levels, 32)["knee"] == 32  # the auto search's knee is the one said
    lines = plateau_lines(block, "runs/p/x/plan.yaml")
    assert lines[0] == "Why it plateaus: interconnect-bound from C=64 (high confidence)"
    command = next(line.strip() for line in lines if line.strip().startswith("orch plan"))
    words = shlex.split(command)
    assert words[:3] == ["orch", "plan", "runs/p/x/plan.yaml"] and words[3] == "--set"
    assert json.loads(words[4].removeprefix("matrix=")) == block["try"][0]["matrix"]


def test_a_verdict_block_round_trips() -> None:
    verdict = verdict_of(level_of({"level": {"client_cpu_utilization": 0.95}}))
    again = LevelResult.model_validate({**level_of({}).model_dump(), "limiter": verdict_json(verdict)})
    assert verdict_of(again) == verdict


def test_an_sglang_plans_cap_is_read_and_named_by_its_own_flag() -> None:
    """`max-running-requests` is SGLang's scheduler cap: read from its plan, and the verdict
    names it (vLLM's `--max-num-seqs` was read and named for every engine before)."""
    facts = plan_facts({"tp-size": 8, "max-running-requests": 64}, ["--chunked-prefill-size", "4096"],
                       flags=engine("sglang").flags)
    assert (facts.max_num_seqs, facts.max_num_batched_tokens) == (64, 4096)
    capped = level_of({"level": {"max_concurrency": 128, "max_concurrent_requests": 128},
                       "server": {"max_running": 64, "max_waiting": 64, "max_kv_cache_usage": 0.5}}, 128)
    verdict = Judge(facts, {"tp-size": 8, "max-running-requests": 64}).level(capped)
    assert verdict["name"] == "scheduler-cap" and "--max-running-requests 64" in verdict["why"]
    assert verdict["figures"]["max-running-requests"] == 64 and "max_num_seqs" not in verdict["figures"]
    block = Judge(facts, {"tp-size": 8, "max-running-requests": 64}).sweep([capped], None)
    assert block["try"][0]["matrix"] == {"service.args.max-running-requests": [128, 256]}


def test_an_sglang_plans_cap_with_a_ttft_jump_is_scheduler_cap_in_its_own_flags() -> None:
    """Sparse gauges: the plan's max-running-requests 4 under C=8 and the TTFT's jump from
    the level before (Judge.level is handed the sweep's earlier levels) decide."""
    args = {"tp-size": 2, "max-running-requests": 4}
    judge = Judge(plan_facts(args, flags=engine("sglang").flags), args)
    c1 = level_of({"level": {"median_ttft_ms": 60.0, "output_throughput": 58.0}}, 1)
    c8 = level_of({"level": {"median_ttft_ms": 2413.0, "output_throughput": 209.0}, "server": {"max_running": 0, "max_waiting": 0,
                                                                   "scrapes": 2}}, 8)
    verdict = judge.level(c8, [c1])
    assert (verdict["name"], verdict["confidence"]) == ("scheduler-cap", "medium"), verdict
    assert verdict["figures"]["max-running-requests"] == 4 and "--max-running-requests 4" in verdict["why"]
    assert judge.level(c8)["name"] == "not-enough-evidence"  # no level before it: no jump
    c8.limiter = verdict
    assert judge.sweep([c1, c8], None)["try"][0]["matrix"] == {"service.args.max-running-requests": [8, 16]}
