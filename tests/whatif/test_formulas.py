"""The what-if model's formulas, one at a time, on the known models and GPUs: bytes on the
links, weights and KV per GPU, the experts a batch touches, the memory check, and the anchor
that reproduces a measured deployment at its own flags."""

from __future__ import annotations

from dataclasses import replace

import pytest

from orchestrator.whatif.anchors import KIMI_INT4, KIMI_NVFP4, MINIMAX_EP
from orchestrator.whatif.costs import (
    Box,
    fits,
    hop_count,
    kv_bytes_per_token_layer,
    step_parts,
    touched_experts,
    weights_per_gpu_gib,
    wire_bytes_per_token,
)
from orchestrator.whatif.engine_cost import CONSTANTS, engine
from orchestrator.whatif.errors import WhatIfUnknown
from orchestrator.whatif.hardware import GPUS, gpu, links_of
from orchestrator.whatif.shapes import KIMI_K25_NVFP4, MINIMAX_M25_FP8


def at(box: Box, **flags: object) -> Box:
    return replace(box, deployment=replace(box.deployment, **flags))


def test_a_token_touches_its_experts_and_a_big_batch_all_of_them() -> None:
    assert touched_experts(KIMI_K25_NVFP4, 1) == pytest.approx(8)
    assert touched_experts(KIMI_K25_NVFP4, 4096) == pytest.approx(384, rel=1e-3)
    assert 8 < touched_experts(KIMI_K25_NVFP4, 16) < 16 * 8


def test_the_all_reduce_bytes_are_the_ring_of_two_per_layer() -> None:
    # 61 layers x 2 all-reduces x 7,168 x 2 bytes x (rx + tx) x 2(N-1)/N on TP8: 6.12 MB
    assert wire_bytes_per_token(KIMI_NVFP4.box) == pytest.approx(61 * 2 * 7168 * 2 * 2 * 2 * 7 / 8)
    assert wire_bytes_per_token(MINIMAX_EP.box) == pytest.approx(62 * 2 * 3072 * 2 * 2 * 2 * 3 / 4)
    assert wire_bytes_per_token(at(KIMI_NVFP4.box, tp=1)) == 0
    assert hop_count(KIMI_NVFP4.box) == 2 * 61 * 2 * 7
    assert hop_count(at(KIMI_NVFP4.box, tp=1)) == 0


def test_weights_split_over_tensor_and_expert_parallel_ranks() -> None:
    tp8 = weights_per_gpu_gib(KIMI_NVFP4.box)
    assert KIMI_K25_NVFP4.weight_bytes / 2**30 / 8 == pytest.approx(tp8)
    assert weights_per_gpu_gib(at(KIMI_NVFP4.box, tp=4, dp=2)) == pytest.approx(2 * tp8)
    # expert parallel spreads the experts over all 8 GPUs; only the dense part is replicated
    ep = weights_per_gpu_gib(at(KIMI_NVFP4.box, tp=4, dp=2, ep=True))
    assert tp8 < ep < 1.1 * tp8


def test_kv_per_token_mla_is_replicated_gqa_is_split() -> None:
    assert kv_bytes_per_token_layer(KIMI_NVFP4.box) == 576  # fp8: one byte, every rank
    assert kv_bytes_per_token_layer(at(KIMI_NVFP4.box, tp=2)) == 576
    assert kv_bytes_per_token_layer(MINIMAX_EP.box) == 2 * 2 * 128 * 2  # 2 of 8 heads, bf16
    assert kv_bytes_per_token_layer(at(MINIMAX_EP.box, tp=16)) == 2 * 1 * 128 * 2  # at least one


def test_a_step_grows_with_the_batch_and_waits_on_links_only_with_tp() -> None:
    small, big = (step_parts(KIMI_NVFP4.box, CONSTANTS, b) for b in (1, 128))
    assert big.total > small.total and big.weights > small.weights and big.wire > small.wire
    alone = step_parts(at(KIMI_NVFP4.box, tp=1), CONSTANTS, 1)
    assert alone.links == 0


def test_the_memory_check_says_why_in_one_line() -> None:
    ok, line = fits(at(KIMI_NVFP4.box, tp=4, dp=2), 142.4)
    assert not ok
    assert line.startswith("weights 142 GiB per GPU > 95.6 GiB x 0.90 (TP4 x DP2")
    assert fits(KIMI_NVFP4.box)[0]
    eng = engine(at(KIMI_NVFP4.box, tp=4, dp=2))
    assert not eng.fits and "> 95.6 GiB x 0.90" in eng.why_not
    assert engine(at(MINIMAX_EP.box, tp=2, dp=2)).fits
    # MiniMax's measurement left 8.8 GiB beside weights and cache: at 0.65 nothing is left
    tight = engine(at(MINIMAX_EP.box, gpu_memory_utilization=0.65))
    assert not tight.fits and tight.why_not.startswith("no memory left for the KV cache")


@pytest.mark.parametrize("measured", [KIMI_NVFP4, MINIMAX_EP, KIMI_INT4])
def test_a_measured_deployment_is_reproduced_at_its_own_flags(measured: object) -> None:
    from orchestrator.whatif.anchors import Measured

    assert isinstance(measured, Measured)
    eng = engine(measured.box)
    assert eng.anchored and eng.fits
    assert eng.cost.base_s == pytest.approx(measured.step_base_s)
    assert eng.cost.per_seq_s == pytest.approx(measured.step_per_seq_s)
    assert eng.cost.prefill_per_token_s == pytest.approx(measured.prefill_per_token_s)
    assert eng.kv_tokens_per_replica == measured.kv_cache_tokens
    assert eng.weights_gib == pytest.approx(measured.weights_gib)
    assert eng.allreduce_wait == pytest.approx(measured.allreduce_wait)


def test_the_kv_dtype_and_dp_change_the_engines_limits() -> None:
    auto = engine(at(KIMI_NVFP4.box, kv_cache_dtype="auto"))
    assert auto.kv_tokens_per_replica == KIMI_NVFP4.kv_cache_tokens // 2  # two bytes, half
    dp = engine(at(MINIMAX_EP.box, tp=2, dp=2))
    tp4 = engine(MINIMAX_EP.box)
    assert dp.cost.limits.max_running == 2 * 256 and dp.cost.limits.max_batched_tokens == 2 * 8192
    assert dp.cost.limits.kv_tokens == 2 * dp.kv_tokens_per_replica
    assert dp.cost.per_seq_s < tp4.cost.per_seq_s  # each replica steps half the batch


def test_gpus_are_found_by_nvidia_smis_name() -> None:
    for name in ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA H100 80GB HBM3",
                 "NVIDIA H200", "NVIDIA B200", "NVIDIA L40S", "NVIDIA A100-SXM4-80GB"):
        assert gpu(name) is GPUS[name]
    assert gpu("h200") is GPUS["NVIDIA H200"]
    assert links_of(gpu("H100 80GB HBM3")).kind == "NVLink"
    assert links_of(gpu("L40S")).kind == "PCIe gen4 x16"
    assert gpu("A100-SXM4-80GB").rate("fp4") == 312  # no FP4 nor FP8 unit: bf16's rate
    with pytest.raises(WhatIfUnknown, match="unknown GPU 'RTX 9090'"):
        gpu("RTX 9090")


def test_a_model_on_another_gpu_comes_from_the_formulas_alone() -> None:
    h200 = gpu("NVIDIA H200")
    box = Box(MINIMAX_M25_FP8, h200, links_of(h200), MINIMAX_EP.box.deployment)
    eng = engine(box)
    assert not eng.anchored and eng.fits
    assert eng.kv_tokens_per_replica > MINIMAX_EP.kv_cache_tokens  # 141 GB against 96
