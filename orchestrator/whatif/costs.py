"""The formulas: one engine step's time, split by what it waits on, and the memory check.

A step gives one token to each of a replica's `b` running sequences and prefills `p` prompt
tokens. Per GPU of the replica it takes (model seconds; docs/simulator.md has the derivation):

    overhead   LAYER_S x L                                   kernel launches, norms, sampling
    sequences  SEQ_S x L x b                                 per-sequence work in every layer
    weights    W_q x bytes(b + p) / bandwidth                dense / tp + touched experts / ep
    kv         b x ctx x L x kv_bytes / (bandwidth x KV_EFF) attention reads the context
    compute    2 x active / tp x (b + p) / (tflops x COMPUTE_EFF)
    hops       HOP_S x collectives x hops                    a ring's latency: 2(n - 1) per all-reduce
    wire       collectives x 2(n - 1)/n x (b + p) x hidden x 2 / (link x LINK_EFF)

with 2 collectives per layer (the attention's and the MLP's all-reduce; with expert parallel
the MoE's spans tp x dp GPUs). The fitted constants (LAYER_S, SEQ_S, HOP_S and one W_q per
quantization: the inverse of the weight kernels' bandwidth efficiency) are the coefficients
of a linear model, fitted by fit.py; the others are fixed priors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.whatif.deployment import KV_DTYPE_BYTES, Deployment
from orchestrator.whatif.hardware import GpuSpec, Links
from orchestrator.whatif.shapes import COMPUTE_DTYPE, QUANT_BYTES, ModelShape

GIB = 1024**3
KV_EFF = 0.6  # share of the memory bandwidth attention's KV reads reach
COMPUTE_EFF = 0.5  # share of the dense tensor rate the matmuls reach
LINK_EFF = 0.5  # share of a link's bandwidth a ring all-reduce's bytes reach (NCCL bus bandwidth)
NVLINK_HOP_SHARE = 0.3  # an NVLink hop's latency against a PCIe one's (not calibrated: no NVLink run)
RESERVE_GIB = 1.5  # per GPU beside weights and KV cache: CUDA context, activations, graphs
ACTIVATION_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class Constants:
    """The fitted constants (fit.py; docs/simulator.md has the calibration table)."""

    layer_s: float  # LAYER_S
    seq_s: float  # SEQ_S
    hop_s: float  # HOP_S (a PCIe hop)
    weight: dict[str, float] = field(default_factory=dict)  # W_q by quantization

    def weight_factor(self, quant: str) -> float:
        """W_q; a quantization no deployment calibrated takes the mean of the others."""
        if quant in self.weight:
            return self.weight[quant]
        return sum(self.weight.values()) / len(self.weight) if self.weight else 1.0


@dataclass(frozen=True)
class Box:
    """One deployment of one model on one kind of GPU."""

    model: ModelShape
    gpu: GpuSpec
    links: Links
    deployment: Deployment
    gpu_count: int | None = None  # the GPUs the box has (None: not known, not checked)


def touched_experts(model: ModelShape, tokens: float) -> float:
    """Expected distinct experts `tokens` tokens route to in one layer (uniform routing)."""
    if not model.experts or tokens <= 0:
        return 0.0
    miss: float = (1.0 - model.active_experts / model.experts) ** tokens
    return model.experts * (1.0 - miss)


def weight_read_bytes(box: Box, tokens: float) -> float:
    """Weight bytes one GPU reads in a step of `tokens` tokens (per replica)."""
    m, d = box.model, box.deployment
    routed = tokens * d.dp if d.ep else tokens  # expert parallel: every replica's tokens
    experts = m.moe_layers * touched_experts(m, routed) * m.expert_bytes / d.ep_size
    return m.dense_bytes / d.tp + experts


def kv_bytes_per_token_layer(box: Box) -> float:
    """KV bytes one GPU holds per token per layer: MLA's latent on every TP rank, GQA's heads
    split over them (at least one each)."""
    m, d = box.model, box.deployment
    per_head = m.kv_elements / max(1, m.kv_heads)
    heads = max(1, m.kv_heads // d.tp) if m.attention == "gqa" else m.kv_heads
    return per_head * heads * KV_DTYPE_BYTES[d.kv_cache_dtype]


def collectives(box: Box) -> list[tuple[int, int]]:
    """(count, GPUs) of the collectives of one step over all layers."""
    m, d = box.model, box.deployment
    out = []
    if d.tp > 1:
        out.append((m.layers, d.tp))  # attention's all-reduce
    moe_group = d.ep_size if m.experts else d.tp
    if moe_group > 1:
        out.append((m.layers, moe_group))  # the MLP's / MoE's
    return out


def hop_count(box: Box) -> float:
    """Ring steps of one step's collectives: 2(n - 1) per all-reduce, and a pipeline's sends."""
    return sum(count * 2 * (n - 1) for count, n in collectives(box)) + (box.deployment.pp - 1)


def wire_seconds(box: Box, tokens: float) -> float:
    """Seconds on the links for `tokens` tokens (bytes at LINK_EFF of their bandwidth)."""
    d, m = box.deployment, box.model
    total = 0.0
    for count, n in collectives(box):
        spread = d.dp if (n > d.tp) else 1  # the expert-parallel group carries every replica's
        total += count * 2 * (n - 1) / n * tokens * spread * m.hidden * ACTIVATION_BYTES
    return total / (box.links.bandwidth_gbs * 1e9 * LINK_EFF)


def wire_bytes_per_token(box: Box) -> float:
    """Link bytes (sent + received) per GPU per token: what the stand-in PCIe counters show."""
    hidden = box.model.hidden
    return sum(count * 2 * (n - 1) / n * hidden * ACTIVATION_BYTES * 2
               for count, n in collectives(box))


@dataclass(frozen=True)
class StepParts:
    """One step's seconds by what it waits on."""

    overhead: float
    sequences: float
    weights: float
    kv: float
    compute: float
    hops: float
    wire: float

    @property
    def total(self) -> float:
        return (self.overhead + self.sequences + self.weights + self.kv + self.compute
                + self.hops + self.wire)

    @property
    def links(self) -> float:
        return self.hops + self.wire


def hop_seconds(box: Box, consts: Constants) -> float:
    return consts.hop_s * (NVLINK_HOP_SHARE if box.links.nvlink_gbs else 1.0)


def step_parts(box: Box, consts: Constants, running: float, prefill: float = 0.0,
               context: float = 300.0) -> StepParts:
    """The step of a replica with `running` sequences of `context` tokens and `prefill` prompt
    tokens admitted, per GPU."""
    m, g = box.model, box.gpu
    tokens = running + prefill
    bandwidth = g.bandwidth_gbs * 1e9
    flops = g.rate(COMPUTE_DTYPE[m.quant]) * 1e12 * COMPUTE_EFF
    return StepParts(
        overhead=consts.layer_s * m.layers,
        sequences=consts.seq_s * m.layers * running,
        weights=consts.weight_factor(m.quant) * weight_read_bytes(box, tokens) / bandwidth,
        kv=running * context * m.layers * kv_bytes_per_token_layer(box) / (bandwidth * KV_EFF),
        compute=2 * m.active_params / box.deployment.tp * tokens / flops,
        hops=hop_seconds(box, consts) * hop_count(box),
        wire=wire_seconds(box, tokens),
    )


def weights_per_gpu_gib(box: Box) -> float:
    m, d = box.model, box.deployment
    experts = m.expert_total_params * QUANT_BYTES[m.quant]
    return (m.dense_bytes / d.tp + experts / d.ep_size) / d.pp / GIB


def memory_budget_gib(box: Box) -> float:
    return box.gpu.memory_gib * box.deployment.gpu_memory_utilization


def fits(box: Box, weights_gib: float | None = None) -> tuple[bool, str]:
    """Whether the deployment's GPUs are in the box and one replica's weights fit each GPU's
    share of memory, and why (one line)."""
    d = box.deployment
    if box.gpu_count is not None and d.gpus > box.gpu_count:
        return False, f"{d.label()} needs {d.gpus} GPUs; the box has {box.gpu_count}"
    weights = weights_per_gpu_gib(box) if weights_gib is None else weights_gib
    budget = memory_budget_gib(box)
    util = box.deployment.gpu_memory_utilization
    line = (f"weights {weights:.0f} GiB per GPU {{}} {box.gpu.memory_gib:.1f} GiB x {util:.2f} "
            f"({box.deployment.label()}, {box.model.name})")
    return (weights <= budget, line.format("<=" if weights <= budget else ">"))


def kv_tokens_per_replica(box: Box, available_gib: float) -> int:
    """Tokens a replica's KV cache holds in `available_gib` per GPU (whole blocks of 16)."""
    per_token = kv_bytes_per_token_layer(box) * box.model.layers / box.deployment.pp
    tokens = int(max(0.0, available_gib) * GIB / per_token) if per_token else 0
    return tokens // 16 * 16
