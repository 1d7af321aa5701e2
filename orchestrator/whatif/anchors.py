"""The measured deployments: the motivating run's three (docs/simulator.md), each as the
deployment it was, its linear step cost, its KV cache and its GPUs' all-reduce wait.

They are the what-if model's calibration (fit.py fits its constants to their targets) and its
anchors: a plan of the same model on the same GPU is predicted as the measured cost times
what the formulas say changed (engine_cost.py), so each measured deployment is reproduced
exactly at its own flags. The simulator's profiles (sim/profiles.py) take their figures from
here, keyed by profile name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.whatif.costs import Box
from orchestrator.whatif.deployment import Deployment
from orchestrator.whatif.hardware import DEFAULT_GPU, GPUS, links_of
from orchestrator.whatif.shapes import KIMI_K25_INT4, KIMI_K25_NVFP4, MINIMAX_M25_FP8, ModelShape

RTX_PRO_6000 = GPUS[DEFAULT_GPU]
BOX_GPUS = 8  # the measured deployments' machine: 8 of them (MiniMax ran on 4)


@dataclass(frozen=True)
class Measured:
    box: Box
    step_base_s: float  # per engine step
    step_per_seq_s: float  # per running sequence per step
    prefill_per_token_s: float
    kv_cache_tokens: int  # at the deployment's kv-cache-dtype
    weights_gib: float  # per GPU, as vLLM's "Model loading took" line says
    kv_cache_gib: float  # per GPU, "Available KV cache memory"
    allreduce_wait: float  # share of a busy step the SMs wait on the links
    targets: dict[int, float] = field(default_factory=dict)  # concurrency -> measured tok/s


def _box(model: ModelShape, **deployment: object) -> Box:
    return Box(model, RTX_PRO_6000, links_of(RTX_PRO_6000), Deployment(**deployment))  # type: ignore[arg-type]


KIMI_NVFP4 = Measured(
    _box(KIMI_K25_NVFP4, tp=8, max_num_seqs=128, kv_cache_dtype="fp8", max_model_len=262_144),
    step_base_s=0.015643, step_per_seq_s=0.0006443, prefill_per_token_s=0.00025,
    kv_cache_tokens=449_536, weights_gib=71.2, kv_cache_gib=15.43, allreduce_wait=0.6,
    targets={1: 61.3, 32: 800.0, 128: 1238.0})
MINIMAX_EP = Measured(
    _box(MINIMAX_M25_FP8, tp=4, ep=True, max_num_seqs=256, kv_cache_dtype="auto",
         max_model_len=196_608),
    step_base_s=0.011706, step_per_seq_s=0.0001903, prefill_per_token_s=0.00008,
    kv_cache_tokens=399_424, weights_gib=53.6, kv_cache_gib=23.62, allreduce_wait=0.05,
    targets={1: 84.0, 256: 4000.0})
KIMI_INT4 = Measured(
    _box(KIMI_K25_INT4, tp=8, max_num_seqs=128, kv_cache_dtype="fp8", max_model_len=262_144),
    step_base_s=0.011860, step_per_seq_s=0.0003145, prefill_per_token_s=0.0002,
    kv_cache_tokens=449_536, weights_gib=74.3, kv_cache_gib=13.9, allreduce_wait=0.8,
    targets={1: 82.0, 128: 2276.0})

# Simulator profile name -> its measured deployment (the Marlin fallback runs NVFP4's figures).
BY_PROFILE: dict[str, Measured] = {
    "kimi-k2.5-nvfp4-8x-rtx-pro-6000": KIMI_NVFP4,
    "kimi-k2.5-nvfp4-marlin-fallback": KIMI_NVFP4,
    "minimax-m2.5-4x-ep": MINIMAX_EP,
    "kimi-k2.5-int4-8x-rtx-pro-6000": KIMI_INT4,
}
MEASURED: dict[str, Measured] = {
    "kimi-nvfp4": KIMI_NVFP4, "minimax-ep": MINIMAX_EP, "kimi-int4": KIMI_INT4}


def anchor_for(box: Box) -> Measured | None:
    """The measured deployment of the same model on the same GPU, if any."""
    for measured in MEASURED.values():
        if measured.box.model == box.model and measured.box.gpu == box.gpu:
            return measured
    return None
