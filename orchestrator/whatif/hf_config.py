"""A `ModelShape` from a Hugging Face `config.json`: the real keys of the DeepSeek-V3 / Kimi
(MLA: kv_lora_rank, qk_rope_head_dim, n_routed_experts, moe_intermediate_size,
first_k_dense_replace; Kimi-K2.5 nests them in `text_config`), Mixtral / MiniMax / Qwen-MoE
(num_local_experts or num_experts, GQA: num_key_value_heads, head_dim) and dense models.
The quantization comes from `quantization_config` (modelopt NVFP4, compressed-tensors INT4,
fp8), else the torch_dtype. `read_config` is the only I/O: the file at the edge.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.whatif.errors import WhatIfUnknown
from orchestrator.whatif.shapes import ModelShape


def _int(config: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    if default is not None:
        return default
    raise WhatIfUnknown(f"config.json has no {' or '.join(keys)} (a whole number)")


def quantization(config: Mapping[str, Any]) -> str:
    """nvfp4, int4, fp8 or bf16: what `quantization_config` (or torch_dtype) says."""
    quant = config.get("quantization_config")
    if isinstance(quant, Mapping):
        text = json.dumps(quant).lower()
        if "nvfp4" in text or "fp4" in text:
            return "nvfp4"
        if '"num_bits": 4' in text or "int4" in text or "w4a16" in text or "awq" in text \
                or "gptq" in text:
            return "int4"
        if "fp8" in text or '"num_bits": 8' in text:
            return "fp8"
    return "bf16"


def _attention(config: Mapping[str, Any], hidden: int, heads: int) -> tuple[str, int, int, int]:
    """(kind, KV elements per token per layer, KV heads, attention parameters per layer)."""
    if "kv_lora_rank" in config:  # multi-head latent attention
        rank, rope = _int(config, "kv_lora_rank"), _int(config, "qk_rope_head_dim")
        nope = _int(config, "qk_nope_head_dim", default=128)
        v_dim = _int(config, "v_head_dim", default=nope)
        q_rank = config.get("q_lora_rank")
        q = hidden * heads * (nope + rope) if not isinstance(q_rank, int) else \
            hidden * q_rank + q_rank * heads * (nope + rope)
        params = q + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        return "mla", rank + rope, 1, params
    kv_heads = _int(config, "num_key_value_heads", default=heads)
    head_dim = _int(config, "head_dim", default=hidden // heads)
    params = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    return "gqa", 2 * kv_heads * head_dim, kv_heads, params


def shape_from_config(config: Mapping[str, Any], name: str = "config.json") -> ModelShape:
    """The shape a `config.json` describes (its `text_config` when it nests one)."""
    outer = config
    text = config.get("text_config")
    if isinstance(text, Mapping):
        config = {**text, "quantization_config": text.get("quantization_config")
                  or outer.get("quantization_config")}
    layers, hidden = _int(config, "num_hidden_layers"), _int(config, "hidden_size")
    heads = _int(config, "num_attention_heads")
    kind, kv_elements, kv_heads, attention = _attention(config, hidden, heads)
    experts = _int(config, "n_routed_experts", "num_local_experts", "num_experts", default=0)
    vocab = _int(config, "vocab_size")
    dense_mlp = _int(config, "intermediate_size", default=4 * hidden)
    if experts:
        expert_width = _int(config, "moe_intermediate_size", default=dense_mlp)
        active = _int(config, "num_experts_per_tok", "num_experts_per_token")
        dense_layers = min(layers, _int(config, "first_k_dense_replace", default=0))
        shared = _int(config, "n_shared_experts", default=0)
        moe_layers = layers - dense_layers
        mlp = dense_layers * 3 * hidden * dense_mlp + moe_layers * shared * 3 * hidden * expert_width
    else:
        expert_width = active = moe_layers = 0
        mlp = layers * 3 * hidden * dense_mlp
    tied = bool(config.get("tie_word_embeddings", False))
    dense = layers * attention + mlp + (1 if tied else 2) * vocab * hidden
    quant = quantization(config)
    dense_quant = "fp8" if quant == "fp8" else "bf16"  # 4-bit checkpoints keep attention bf16
    return ModelShape(name=name, layers=layers, hidden=hidden, attention=kind,
                      kv_elements=kv_elements, kv_heads=kv_heads, experts=experts,
                      active_experts=active, expert_params=3 * hidden * expert_width,
                      moe_layers=moe_layers, dense_params=dense,
                      quant=quant, dense_quant=dense_quant if experts else quant, vocab=vocab)


def read_config(path: Path) -> ModelShape:
    """The shape of the `config.json` at `path` (a folder: its config.json)."""
    file = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as error:
        raise WhatIfUnknown(f"{file}: cannot read a config.json ({error})") from None
    if not isinstance(data, dict):
        raise WhatIfUnknown(f"{file}: expected a JSON object")
    try:
        return shape_from_config(data, name=str(file.parent.name or file))
    except WhatIfUnknown as error:
        raise WhatIfUnknown(f"{file}: {error.message}") from None
