"""`config.json` to ModelShape, on configs shaped as the real ones: Kimi-K2.5 (its DeepSeek-V3
text model nested in text_config, MLA, NVFP4 or INT4), MiniMax-M2.5 (GQA, FP8) and a dense
Llama; the result matches the known-models table, and bad input names the file and the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.whatif.errors import WhatIfUnknown
from orchestrator.whatif.hf_config import read_config, shape_from_config
from orchestrator.whatif.shapes import KIMI_K25_INT4, KIMI_K25_NVFP4, MINIMAX_M25_FP8, known_model

DEEPSEEK_V3_TEXT: dict[str, Any] = {
    "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 64,
    "num_key_value_heads": 64, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 163840,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
         "exclude_modules": ["lm_head", "*self_attn*"]}
INT4 = {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "symmetric": True, "group_size": 32,
            "strategy": "group"}}}, "ignore": ["lm_head", "re:.*self_attn.*"]}
MINIMAX = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "hidden_size": 3072,
    "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8,
    "head_dim": 128, "intermediate_size": 1536, "num_local_experts": 256,
    "num_experts_per_tok": 8, "vocab_size": 200064, "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn",
                            "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
}  # fmt: skip
LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    "vocab_size": 128256, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def kimi(quant: dict[str, Any], *, nested_quant: bool) -> dict[str, Any]:
    text = {**DEEPSEEK_V3_TEXT, **({"quantization_config": quant} if nested_quant else {})}
    outer: dict[str, Any] = {"architectures": ["KimiK25ForConditionalGeneration"],
                             "model_type": "kimi_k25", "text_config": text,
                             "vision_config": {"hidden_size": 1152}}
    if not nested_quant:
        outer["quantization_config"] = quant
    return outer


@pytest.mark.parametrize(("config", "known"), [
    (kimi(NVFP4, nested_quant=False), KIMI_K25_NVFP4),
    (kimi(NVFP4, nested_quant=True), KIMI_K25_NVFP4),
    (kimi(INT4, nested_quant=True), KIMI_K25_INT4),
    (MINIMAX, MINIMAX_M25_FP8),
])  # fmt: skip
def test_a_config_gives_the_known_shape(config: dict[str, Any], known: object) -> None:
    shape = shape_from_config(config, name=known.name)  # type: ignore[attr-defined]
    assert shape == known


def test_the_shapes_say_the_models_sizes() -> None:
    assert KIMI_K25_NVFP4.total_params / 1e9 == pytest.approx(1026, rel=0.01)  # "1T"
    assert KIMI_K25_NVFP4.active_params / 1e9 == pytest.approx(32.7, rel=0.02)  # "32B active"
    assert MINIMAX_M25_FP8.total_params / 1e9 == pytest.approx(229, rel=0.01)  # "230B"
    assert MINIMAX_M25_FP8.active_params / 1e9 == pytest.approx(11.0, rel=0.05)  # "10B active"
    assert KIMI_K25_NVFP4.attention == "mla" and KIMI_K25_NVFP4.kv_elements == 576
    assert MINIMAX_M25_FP8.attention == "gqa" and MINIMAX_M25_FP8.kv_elements == 2048


def test_a_dense_model_has_no_experts() -> None:
    shape = shape_from_config(LLAMA_8B)
    assert shape.experts == 0 and shape.quant == "bf16" and shape.kv_elements == 2 * 8 * 128
    assert shape.total_params / 1e9 == pytest.approx(8.03, rel=0.01)


def test_read_config_takes_a_file_or_its_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(MINIMAX))
    assert read_config(tmp_path).layers == read_config(tmp_path / "config.json").layers == 62


def test_bad_configs_name_the_file_and_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    missing.mkdir()
    (missing / "config.json").write_text(json.dumps({k: v for k, v in MINIMAX.items()
                                                     if k != "num_hidden_layers"}))
    with pytest.raises(WhatIfUnknown, match=r"missing/config.json: config.json has no num_hidden_layers"):
        read_config(missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(WhatIfUnknown, match=r"broken\.json: cannot read a config\.json"):
        read_config(broken)


def test_known_models_by_repository_any_case() -> None:
    assert known_model("nvidia/kimi-k2.5-nvfp4") is KIMI_K25_NVFP4
    assert known_model("moonshotai/Kimi-K2.5") is KIMI_K25_INT4
    assert known_model("someone/else") is None
