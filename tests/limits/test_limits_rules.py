"""The limiter of a level, table-driven (limiter_cases.yaml): each case is a level result as
the writer would hold it, read back as a `LevelResult`, its evidence gathered and judged; and
the knee of a sweep with the limiter at and after it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.engines import engine
from orchestrator.limits.evidence import PlanFacts, gather
from orchestrator.limits.rules import LIMITERS, knee, limiter
from orchestrator.limits.topology import layout_links, parse_topology
from orchestrator.runs.run_records import LevelResult

HERE = Path(__file__).parent
CASES = yaml.safe_load((HERE / "limiter_cases.yaml").read_text())
LEVEL_FILES = Path(__file__).parents[1] / "bench" / "level_files"
HOST_KEYS = ("pcie_rx_mb_s", "pcie_tx_mb_s", "nvlink_mb_s", "sm_active")


def gpu_block(gpu: dict[str, Any], count: int) -> dict[str, Any]:
    one = {"index": 0, "samples": 10, "mean_power_w": gpu["power"], "power_limit_w": gpu["limit"],
           "mean_util_pct": gpu["util"], "mean_mem_util_pct": gpu.get("mem_util"),
           "mean_sm_clock_mhz": 2000.0, "max_sm_clock_mhz": 2100.0,
           "throttled": gpu.get("throttled", False)}
    return {"source": "nvidia-smi", "samples": 10, "gpu_count": count, "mean_util_pct": gpu["util"],
            "throttled": gpu.get("throttled", False), "gpus": [{**one, "index": i} for i in range(count)],
            **{f"mean_{key}": gpu[key] for key in HOST_KEYS if key in gpu}}


def level_of(case: dict[str, Any], c: int = 64) -> LevelResult:
    data: dict[str, Any] = {
        "level": f"c{c}", "mode": "closed", "max_concurrency": c, "completed": 2 * c, "failed": 0,
        "duration": 10.0, "output_throughput": 1000.0, "client_cpu_utilization": 0.3,
        "max_concurrent_requests": c, "mean_input_tokens": 100.0, "mean_ttft_ms": 200.0, "mean_itl_ms": 20.0,
    }
    data |= case.get("level") or {}
    if "server" in case:
        data["server_metrics"] = {"scrapes": 10, "source": "vllm", **case["server"]}
    if "gpu" in case:
        data["gpu_telemetry"] = gpu_block(case["gpu"], (case.get("plan") or {}).get("gpus") or 8)
    return LevelResult.model_validate(json.loads(json.dumps(data)))  # as read from a file


def plan_of(case: dict[str, Any]) -> PlanFacts:
    plan = case.get("plan") or {}
    links = None
    if "topology" in plan:
        topo = parse_topology((HERE / "topo" / plan["topology"]).read_text())
        links = layout_links(topo, engine("vllm").layout(plan.get("args") or {}))
    return PlanFacts(max_num_seqs=plan.get("max_num_seqs"), links=links, gpus=plan.get("gpus"))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_limiter_cases(case: dict[str, Any]) -> None:
    before = case.get("before")
    earlier = level_of({"level": {"median_ttft_ms": before["median_ttft_ms"]}}, before["c"]) if before else None
    verdict = limiter(gather(level_of(case), plan_of(case), earlier))
    assert [verdict.name, verdict.confidence] == case["expect"], verdict.why
    assert verdict.name in LIMITERS
    assert verdict.why
    if verdict.name != "not-enough-evidence":
        assert verdict.figures, "a verdict names the figures that decided it"


def test_every_limiter_has_a_case() -> None:
    assert {c["expect"][0] for c in CASES} == set(LIMITERS)


def test_prefill_and_decode_split_from_the_level() -> None:
    evidence = gather(level_of({}))
    assert (evidence.prefill_tok_s, evidence.decode_tok_s) == (500.0, 50.0)  # 100 tok / 0.2 s; 1000 / 20 ms


def test_simulated_levels_split_in_model_time() -> None:
    level = level_of({"level": {"normalized": {"mean_ttft_ms": 400.0, "mean_itl_ms": 40.0}}})
    assert (gather(level).prefill_tok_s, gather(level).decode_tok_s) == (250.0, 25.0)


@pytest.mark.parametrize("path", sorted(LEVEL_FILES.glob("*.json")), ids=lambda p: p.name)
def test_level_files_of_older_runs_still_judge(path: Path) -> None:
    verdict = limiter(gather(LevelResult.model_validate(json.loads(path.read_text()))))
    assert verdict.name in LIMITERS


def sweep(curve: dict[int, float], case_at: dict[int, dict[str, Any]]) -> list[LevelResult]:
    levels = []
    for c, rate in curve.items():
        case = case_at.get(c, {})
        level = level_of({**case, "level": {**(case.get("level") or {}), "output_throughput": rate}}, c)
        levels.append(level)
    return levels


SEED_PLAN = {"topology": "pcie-8x-l4-phb-sys.txt", "args": {"tensor-parallel-size": 8}}
SEED_GPU = {"util": 90, "power": 270, "limit": 600}


def test_knee_of_the_seed_is_interconnect_bound() -> None:
    curve = {1: 61.3, 2: 57.8, 4: 93.7, 8: 276.6, 16: 543.8, 32: 799.9, 64: 1200.0, 128: 1238.0, 256: 1240.0}
    at = {c: {"gpu": SEED_GPU} for c in (64, 128, 256)}
    found = knee(sweep(curve, at), plan_of({"plan": SEED_PLAN}))
    assert found.at == 64  # nothing from C=128 on gains 5% over C=64 (1,240 < 1,260)
    assert [c for c, _ in found.after] == [64, 128, 256]
    assert {v.name for _, v in found.after} == {"interconnect-bound"}
    assert found.describe() == "interconnect-bound from C=64"


def test_knee_still_rising_names_the_highest_level() -> None:
    curve = {64: 1000.0, 128: 2000.0, 256: 3900.0}
    found = knee(sweep(curve, {256: {"gpu": {"util": 97, "power": 580, "limit": 600}}}))
    assert found.at is None
    assert found.describe() == "still rising, compute-bound at C=256"


def test_knee_needs_two_levels_but_one_level_still_says_what_held_it() -> None:
    one = knee(sweep({8: 100.0}, {8: {"level": {"client_cpu_utilization": 0.95}}}))
    assert (one.at, one.describe()) == (None, "one level, client-bound at C=8")
    assert knee([]).describe() == "too few levels"


def test_knee_reads_each_level_against_the_one_before() -> None:
    """The plan's cap 4 under C=8, TTFT from 60 ms to 2,413 ms: scheduler-cap without gauges."""
    levels = sweep({1: 58.0, 8: 209.0}, {1: {"level": {"median_ttft_ms": 60.0}},
                                         8: {"level": {"median_ttft_ms": 2413.0}}})
    found = knee(levels, PlanFacts(max_num_seqs=4))
    assert found.describe() == "still rising, scheduler-cap at C=8"
    assert found.verdict is not None and found.verdict.figures["max_num_seqs"] == 4
    alone = knee(levels[1:], PlanFacts(max_num_seqs=4))  # no level before: no jump to read
    assert alone.verdict is not None and alone.verdict.name == "not-enough-evidence"
