"""`predict_plan` and `orch predict` on the shipped plans: the motivating figures at their own
flags, a TP4 x DP2 Kimi that does not fit, a TP8 x DP2 Kimi that needs more GPUs than the box
has, a MiniMax TP2 x DP2 that fits with another curve,
the same curve the simulator's own scheduler runs (virtual time), and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.vllm_cpu import make_model

from orchestrator.plan.loader import load_plan
from orchestrator.plan.prediction import predict_plan
from orchestrator.sim.calibration import batch_run
from orchestrator.sim.options import parse_serve_args
from orchestrator.whatif import WhatIfUnknown

ROOT = Path(__file__).resolve().parents[2]
KIMI = ROOT / "plans/sim/kimi-nvfp4.yaml"
MINIMAX = ROOT / "plans/sim/minimax-m2.5.yaml"
TP4_DP2 = ["service.args.tensor-parallel-size=4", "service.args.data-parallel-size=2"]
TP2_DP2 = ["service.args.tensor-parallel-size=2", "service.args.data-parallel-size=2"]


def plan(path: Path, *sets: str):  # type: ignore[no-untyped-def]
    return load_plan(path, [], list(sets)).plan


def test_the_kimi_plan_predicts_the_motivating_figures() -> None:
    got = predict_plan(plan(KIMI))
    levels = {lv.max_concurrency: lv for lv in got.levels}
    assert got.fits and got.anchored
    assert levels[1].output_throughput == pytest.approx(61.3, rel=0.03)
    assert levels[32].output_throughput == pytest.approx(800, rel=0.05)
    assert levels[128].output_throughput == pytest.approx(1238, rel=0.03)
    assert got.peak_output_throughput == pytest.approx(1238, rel=0.03)
    assert levels[256].waiting == 128 and levels[256].running == 128  # max-num-seqs 128
    assert got.limiter == "interconnect-bound"
    assert got.why == "TP8 all-reduces over PCIe gen5 x16 take 60% of a step"
    assert got.knee == 128
    assert levels[1].mean_tpot_ms == pytest.approx(1000 / 61.3, rel=0.03)


def test_kimi_on_tp4_dp2_does_not_fit() -> None:
    got = predict_plan(plan(KIMI, *TP4_DP2))
    assert not got.fits and got.levels == () and got.limiter == "does-not-fit"
    assert got.why.startswith("weights 142 GiB per GPU > 95.6 GiB x 0.90 (TP4 x DP2")


def test_a_simulated_layout_needing_more_gpus_than_the_box_has_does_not_fit() -> None:
    # TP8 x DP2 would fit each GPU's memory, but takes 16 GPUs of the 8-GPU box
    got = predict_plan(plan(KIMI, "service.args.data-parallel-size=2"))
    assert not got.fits and got.levels == () and got.peak_output_throughput == 0.0
    assert got.why == "TP8 x DP2 needs 16 GPUs; the box has 8"
    assert predict_plan(plan(MINIMAX, "service.args.data-parallel-size=2")).fits  # 4 x 2 GPUs


def test_minimax_on_tp2_dp2_fits_with_another_curve() -> None:
    tp4 = predict_plan(plan(MINIMAX))
    dp2 = predict_plan(plan(MINIMAX, *TP2_DP2))
    assert tp4.fits and dp2.fits and dp2.deployment == "TP2 x DP2 + EP"
    assert tp4.peak_output_throughput == pytest.approx(4000, rel=0.03)
    assert dp2.peak_output_throughput > 1.2 * tp4.peak_output_throughput


@pytest.mark.parametrize(("path", "sets", "argv"), [
    (KIMI, [], ["--profile", "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "--tensor-parallel-size", "8"]),
    (MINIMAX, TP2_DP2, ["--profile", "minimax-m2.5-4x-ep", "--tensor-parallel-size", "2",
                        "--data-parallel-size", "2", "--enable-expert-parallel"]),
])  # fmt: skip
def test_the_prediction_is_what_the_simulators_scheduler_runs(path: Path, sets: list[str],
                                                              argv: list[str]) -> None:
    options = parse_serve_args(["m", *argv])
    got = predict_plan(plan(path, *sets), [1, 16, 64])
    for level in got.levels:
        ran = batch_run(options.profile, level.max_concurrency,
                        max_num_seqs=options.engine_max_num_seqs)
        assert level.output_throughput == pytest.approx(ran.throughput, rel=0.05)


def test_a_vllm_plan_takes_its_gpu_from_the_option(tmp_path: Path) -> None:
    on_h200 = predict_plan(plan(ROOT / "plans/minimax-m2.5.yaml"), [1, 64], gpu_name="NVIDIA H200")
    assert on_h200.fits and not on_h200.anchored and on_h200.gpu == "NVIDIA H200"
    with pytest.raises(WhatIfUnknown, match="unknown GPU"):
        predict_plan(plan(ROOT / "plans/minimax-m2.5.yaml"), gpu_name="GTX 480")
    with pytest.raises(WhatIfUnknown, match=r"does not know the model Qwen/Qwen3-0\.6B"):
        predict_plan(plan(ROOT / "plans/vllm-cpu.yaml"))
    # the tiny model's config.json is read, but its plan serves on no GPU (vllm-cpu)
    make_model(tmp_path / "tiny")
    on_cpu = plan(ROOT / "plans/vllm-cpu-local.yaml", f"vars.model_dir={tmp_path / 'tiny'}")
    with pytest.raises(WhatIfUnknown, match=r"serves on vLLM's CPU build \(vllm-cpu 0\.32\.0\): "
                                            "the what-if model models GPUs only"):
        predict_plan(on_cpu)
    assert predict_plan(on_cpu, [1], gpu_name="NVIDIA H200").gpu == "NVIDIA H200"
    with pytest.raises(WhatIfUnknown, match="the simulator profile instant"):
        predict_plan(plan(KIMI, "service.sim.profile=instant"))


def orch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_orch_predict_prints_the_curve_and_json() -> None:
    shown = orch("predict", str(KIMI))
    assert shown.returncode == 0, shown.stderr
    assert "limiter: interconnect-bound: TP8 all-reduces over PCIe gen5 x16 take 60% of a step" in shown.stdout
    assert "knee at C=128" in shown.stdout
    as_json = orch("predict", str(MINIMAX), "--json", *[a for s in TP2_DP2 for a in ("--set", s)])
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["fits"] and data["deployment"] == "TP2 x DP2 + EP" and data["time"] == "model"
    level = data["levels"][0]
    assert {"max_concurrency", "output_throughput", "mean_ttft_ms", "mean_tpot_ms"} <= set(level)
    refused = orch("predict", str(KIMI), *[a for s in TP4_DP2 for a in ("--set", s)])
    assert refused.returncode == 1 and "does not fit: weights 142 GiB per GPU" in refused.stdout
    unknown = orch("predict", str(ROOT / "plans/vllm-cpu.yaml"))
    assert unknown.returncode == 1 and "does not know the model" in unknown.stderr
    assert "Traceback" not in unknown.stderr
