"""A deployment's engine as the simulator runs it: a linear step cost, its limits, its KV
cache and its GPUs' telemetry figures, from the formulas (costs.py) and, for a model and GPU
that were measured (anchors.py), anchored to that measurement.

Linear cost: a replica's step with b sequences is `base + per_seq x b + prefill x p`, the line
through the formulas' step at b = 1 and at b = B (the most sequences it runs: max-num-seqs or
what its KV cache holds of answers of average length); a prompt token costs its compute and
wire time plus one sequence's per-layer work. DP replicas share the requests: one scheduler
with DP times the limits, each step at b / DP sequences per replica (per_seq / DP).

Anchored: each part is the measured deployment's times the formulas' ratio between this
deployment and the measured one, both lines drawn to the same B (so a larger max-num-seqs
extends the measured line rather than bending it); memory likewise (weights scaled to the measured size, the
reserve beside weights and KV what the measurement left), so a measured deployment is
reproduced exactly at its own flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.whatif.anchors import Measured, anchor_for
from orchestrator.whatif.batch import MEAN_RESPONSE_TOKENS, PROMPT_TOKENS, EngineCost, Limits
from orchestrator.whatif.costs import (
    GIB,
    RESERVE_GIB,
    Box,
    Constants,
    StepParts,
    fits,
    kv_bytes_per_token_layer,
    memory_budget_gib,
    step_parts,
    weights_per_gpu_gib,
    wire_bytes_per_token,
    wire_seconds,
)
from orchestrator.whatif.shapes import COMPUTE_DTYPE

# Fitted on the three measured deployments by fit.py (benchmarks/whatif_calibration.py).
CONSTANTS = Constants(layer_s=1.727e-4, seq_s=1.139e-6, hop_s=5.282e-7,
                      weight={"nvfp4": 1.715, "int4": 0.3482, "fp8": 0.4293})
CONTEXT = PROMPT_TOKENS + MEAN_RESPONSE_TOKENS / 2  # a running sequence's mean context


@dataclass(frozen=True)
class ReplicaCost:
    base_s: float
    per_seq_s: float
    prefill_per_token_s: float


@dataclass(frozen=True)
class Engine:
    """What the formulas say of one deployment."""

    box: Box
    cost: EngineCost
    fits: bool
    why_not: str  # the memory line: why it does not fit (or that it does)
    weights_gib: float  # per GPU
    kv_cache_gib: float  # per GPU
    kv_tokens_per_replica: int
    allreduce_wait: float  # share of a step the SMs wait on the links (b = 1)
    link_bytes_per_token: float  # per GPU, sent + received
    parts_at_peak: StepParts  # a replica's step at its most running sequences
    anchored: bool


def raw_cost(box: Box, consts: Constants, batch: int) -> ReplicaCost:
    """The line through the formulas' step at 1 and at `batch` sequences (per replica)."""
    one = step_parts(box, consts, 1, context=CONTEXT).total
    top = step_parts(box, consts, max(2, batch), context=CONTEXT).total
    slope = (top - one) / (max(2, batch) - 1)
    m, d = box.model, box.deployment
    flops = box.gpu.rate(COMPUTE_DTYPE[m.quant]) * 1e12 * 0.5
    prefill = 2 * m.active_params / d.tp / flops + wire_seconds(box, 1) + consts.seq_s * m.layers
    return ReplicaCost(one - slope, slope, prefill)


def _tokens_exact(box: Box, available_gib: float) -> float:
    per_token = kv_bytes_per_token_layer(box) * box.model.layers / box.deployment.pp
    return max(0.0, available_gib) * GIB / per_token if per_token else 0.0


def _memory(box: Box, anchor: Measured | None) -> tuple[float, float, int]:
    """(weights GiB per GPU, KV cache GiB per GPU, KV tokens per replica)."""
    weights = weights_per_gpu_gib(box)
    if anchor is None:
        kv = memory_budget_gib(box) - weights - RESERVE_GIB
        tokens = _tokens_exact(box, kv)
    else:
        ref = anchor.box
        weights *= anchor.weights_gib / weights_per_gpu_gib(ref)
        reserve = memory_budget_gib(ref) - anchor.weights_gib - anchor.kv_cache_gib
        kv = memory_budget_gib(box) - weights - reserve
        tokens = anchor.kv_cache_tokens * _tokens_exact(box, kv) / _tokens_exact(ref, anchor.kv_cache_gib)
    return weights, max(0.0, kv), round(tokens) // 16 * 16


def running_cap(box: Box, kv_tokens: int) -> int:
    """The most sequences a replica runs: max-num-seqs, or what its cache holds."""
    held = kv_tokens // (PROMPT_TOKENS + MEAN_RESPONSE_TOKENS)
    return max(1, min(box.deployment.max_num_seqs, held))


def _scaled(raw: ReplicaCost, anchor: Measured | None, ref: ReplicaCost | None) -> ReplicaCost:
    if anchor is None or ref is None:
        return raw
    return ReplicaCost(raw.base_s * anchor.step_base_s / ref.base_s,
                       raw.per_seq_s * anchor.step_per_seq_s / ref.per_seq_s,
                       raw.prefill_per_token_s * anchor.prefill_per_token_s / ref.prefill_per_token_s)


def _link_share(box: Box, consts: Constants) -> float:
    parts = step_parts(box, consts, 1, context=CONTEXT)
    return parts.links / parts.total if parts.total else 0.0


def engine(box: Box, consts: Constants = CONSTANTS, anchored: bool = True) -> Engine:
    """The deployment's engine (anchored to a measurement of its model and GPU if any)."""
    anchor = anchor_for(box) if anchored else None
    weights, kv_gib, tokens = _memory(box, anchor)
    ok, line = fits(box, weights)
    if ok and tokens < PROMPT_TOKENS + MEAN_RESPONSE_TOKENS:
        ok, line = False, (f"no memory left for the KV cache: {kv_gib:.1f} GiB per GPU after "
                           f"weights {weights:.0f} GiB ({box.deployment.label()})")
    cap = running_cap(box, tokens)
    raw = raw_cost(box, consts, cap)
    ref = raw_cost(anchor.box, consts, cap) if anchor is not None else None  # the same line
    cost = _scaled(raw, anchor, ref)
    d = box.deployment
    wait = _link_share(box, consts)
    if anchor is not None:
        wait = min(0.95, anchor.allreduce_wait * wait / max(1e-9, _link_share(anchor.box, consts)))
    return Engine(
        box=box,
        cost=EngineCost(cost.base_s, cost.per_seq_s / d.dp, cost.prefill_per_token_s / d.dp,
                        Limits(d.max_num_seqs * d.dp, max(0, tokens) * d.dp,
                               d.max_num_batched_tokens * d.dp)),
        fits=ok, why_not=line, weights_gib=weights, kv_cache_gib=kv_gib,
        kv_tokens_per_replica=tokens, allreduce_wait=wait,
        link_bytes_per_token=wire_bytes_per_token(box),
        parts_at_peak=step_parts(box, consts, cap, context=CONTEXT), anchored=anchor is not None)
