"""What a model is, for the what-if model: its shape and its bytes.

`ModelShape` holds what sets an engine step's cost: the layers and hidden size (all-reduce
bytes), the attention kind and its KV bytes per token per layer, the experts (total, active,
each one's parameters) and the dense parameters, and the bytes per parameter of its
quantization. `hf_config.py` reads one from a Hugging Face `config.json`; KNOWN_MODELS holds
the ones the motivating deployments served, for plans with no config at hand.
"""

from __future__ import annotations

from dataclasses import dataclass

# Bytes per weight of each quantization, scales included: NVFP4 is 4 bits plus an FP8 scale
# per 16 weights (4.5 bits); INT4 (compressed-tensors W4A16) 4 bits plus a bf16 scale per 32
# (4.5 bits); FP8 block-quantized weights carry one fp32 scale per 128x128 block (negligible).
QUANT_BYTES: dict[str, float] = {"nvfp4": 0.5625, "int4": 0.5625, "fp8": 1.0, "bf16": 2.0}
# The tensor-core rate each quantization's matmuls run at (gpus.py: GpuSpec.tflops): INT4
# W4A16 dequantizes to bf16 and multiplies there; NVFP4 and FP8 have their own units.
COMPUTE_DTYPE: dict[str, str] = {"nvfp4": "fp4", "int4": "bf16", "fp8": "fp8", "bf16": "bf16"}


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    attention: str  # "mla" (latent, one KV head replicated on every TP rank) or "gqa"
    kv_elements: int  # KV elements per token per layer (whole model, before TP)
    kv_heads: int  # GQA's KV heads (split across TP ranks, at least one each); 1 for MLA
    experts: int  # routed experts per MoE layer (0: a dense model)
    active_experts: int  # routed experts per token
    expert_params: int  # parameters of one routed expert (gate, up and down)
    moe_layers: int  # layers with routed experts
    dense_params: int  # every other parameter: attention, shared experts, dense MLPs, embeddings
    quant: str  # key of QUANT_BYTES: the routed experts' (and the linear layers') format
    dense_quant: str = "bf16"  # the format of the dense parameters
    vocab: int = 0

    @property
    def expert_total_params(self) -> int:
        return self.experts * self.expert_params * self.moe_layers

    @property
    def total_params(self) -> int:
        return self.expert_total_params + self.dense_params

    @property
    def active_params(self) -> int:
        """Parameters one token multiplies: the dense ones and its active experts."""
        return self.dense_params + self.active_experts * self.expert_params * self.moe_layers

    @property
    def expert_bytes(self) -> float:
        return self.expert_params * QUANT_BYTES[self.quant]

    @property
    def dense_bytes(self) -> float:
        return self.dense_params * QUANT_BYTES[self.dense_quant]

    @property
    def weight_bytes(self) -> float:
        return self.expert_total_params * QUANT_BYTES[self.quant] + self.dense_bytes


def _kimi_k25(quant: str, name: str) -> ModelShape:
    """Kimi-K2.5's text model (DeepSeek-V3's shape): 61 layers of 7,168, MLA (a 512-wide
    latent and a 64-wide rope key per token per layer), 384 routed experts of 2,048 (8 active)
    and one shared expert in 60 layers, one dense layer of 18,432, 163,840 words. Its dense
    part stays bf16 in both checkpoints."""
    hidden, moe = 7168, 2048
    attention = hidden * 1536 + 1536 * 64 * 192 + hidden * 576 + 512 * 64 * 256 + 64 * 128 * hidden
    dense = 61 * attention + 60 * 3 * hidden * moe + 3 * hidden * 18432 + 2 * 163840 * hidden
    return ModelShape(name=name, layers=61, hidden=hidden, attention="mla", kv_elements=576,
                      kv_heads=1, experts=384, active_experts=8, expert_params=3 * hidden * moe,
                      moe_layers=60, dense_params=dense, quant=quant, vocab=163840)


def _minimax_m25() -> ModelShape:
    """MiniMax-M2.5: 62 layers of 3,072, GQA (48 query heads, 8 KV heads of 128), 256 routed
    experts of 1,536 (8 active) in every layer, 200,064 words; FP8 throughout."""
    hidden = 3072
    attention = hidden * 48 * 128 * 2 + hidden * 8 * 128 * 2
    return ModelShape(name="MiniMax-M2.5 FP8", layers=62, hidden=hidden, attention="gqa",
                      kv_elements=2 * 8 * 128, kv_heads=8, experts=256, active_experts=8,
                      expert_params=3 * hidden * 1536, moe_layers=62,
                      dense_params=62 * attention + 2 * 200064 * hidden, quant="fp8",
                      dense_quant="fp8", vocab=200064)


KIMI_K25_NVFP4 = _kimi_k25("nvfp4", "Kimi-K2.5 NVFP4")
KIMI_K25_INT4 = _kimi_k25("int4", "Kimi-K2.5 INT4")
MINIMAX_M25_FP8 = _minimax_m25()

# Hub repositories (as a plan's `model.repo` or `service.model` names them) -> shape.
KNOWN_MODELS: dict[str, ModelShape] = {
    "nvidia/Kimi-K2.5-NVFP4": KIMI_K25_NVFP4,
    "moonshotai/Kimi-K2.5": KIMI_K25_INT4,  # the native checkpoint: INT4 experts
    "MiniMaxAI/MiniMax-M2.5": MINIMAX_M25_FP8,
}


def known_model(repo: str) -> ModelShape | None:
    """The shape of a known repository (case does not matter), else None."""
    wanted = repo.strip().lower()
    for key, shape in KNOWN_MODELS.items():
        if key.lower() == wanted:
            return shape
    return None
