#!/usr/bin/env python3
"""Make a small random-weight Qwen2-style model that a real `vllm serve` loads on a CPU, with
no hub: a config, a byte-level BPE tokenizer trained on a few sentences by `tokenizers`, and
random weights written with `safetensors` (a few MB, a few seconds).

    python scripts/tiny_model.py OUT_DIR [--layers 2] [--seed 0] [--ascii]

Run it with a Python that has `tokenizers`, `safetensors` and `numpy` (a vLLM venv does).
The shape suits vLLM's CPU attention: heads of 64 dims (it refuses 16). `--ascii` limits the
tokenizer's alphabet to printable ASCII so every token is whole text (one stream chunk per
token); by default the full byte alphabet is kept, as real models have, so some tokens are
partial UTF-8 and arrive as chunks with no text. Same arguments, same files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

CORPUS = [
    "Write a detailed step-by-step guide to planting, growing and harvesting a vegetable "
    "garden, from preparing the soil to storing the harvest.",
    "Why is the sky blue? Light from the sun is scattered by the air, and blue light the most.",
    "the of and to in is it you that he was for on are with as his they be at one have this",
    "from or had by word but what some we can out other were all there when up use your how",
    "Water the plants in the morning; the soil keeps the water longer when it is cool.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n",
    "Think step by step, then answer: what is 17 times 3? The answer is 51.",
]
BOS, EOS = "<|im_start|>", "<|im_end|>"
# A chat template in the Qwen style: what /v1/chat/completions renders the messages with.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HIDDEN, HEADS, KV_HEADS, FFN, CONTEXT = 256, 4, 2, 512, 2048


def train_tokenizer(vocab: int, ascii_only: bool):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = ([chr(b) for b in range(0x21, 0x7F)] + ["\u0120", "\u010a"] if ascii_only
                else pre_tokenizers.ByteLevel.alphabet())
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[BOS, EOS],
                                  initial_alphabet=alphabet, show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    return tokenizer


def make(out: Path, *, layers: int = 2, seed: int = 0, ascii_only: bool = False,
         vocab: int = 1024) -> Path:
    import numpy as np
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(vocab, ascii_only)
    tokenizer.save(str(out / "tokenizer.json"))
    n_vocab = tokenizer.get_vocab_size()
    bos, eos = tokenizer.token_to_id(BOS), tokenizer.token_to_id(EOS)
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": EOS,
        "pad_token": EOS, "model_max_length": CONTEXT, "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(i): {"content": t, "special": True, "lstrip": False,
                                          "rstrip": False, "normalized": False,
                                          "single_word": False}
                                 for i, t in ((bos, BOS), (eos, EOS))},
    }, indent=1))
    head_dim = HIDDEN // HEADS
    (out / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": layers,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": head_dim,
        "vocab_size": n_vocab, "max_position_embeddings": CONTEXT, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "bos_token_id": bos, "eos_token_id": eos,
        "use_sliding_window": False,
    }, indent=1))
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": bos, "eos_token_id": eos}))

    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> object:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    kv = KV_HEADS * head_dim
    tensors = {"model.embed_tokens.weight": weights(n_vocab, HIDDEN),
               "model.norm.weight": np.ones(HIDDEN, dtype=np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors |= {
            p + "input_layernorm.weight": np.ones(HIDDEN, dtype=np.float32),
            p + "post_attention_layernorm.weight": np.ones(HIDDEN, dtype=np.float32),
            p + "self_attn.q_proj.weight": weights(HIDDEN, HIDDEN),
            p + "self_attn.q_proj.bias": weights(HIDDEN),
            p + "self_attn.k_proj.weight": weights(kv, HIDDEN),
            p + "self_attn.k_proj.bias": weights(kv),
            p + "self_attn.v_proj.weight": weights(kv, HIDDEN),
            p + "self_attn.v_proj.bias": weights(kv),
            p + "self_attn.o_proj.weight": weights(HIDDEN, HIDDEN),
            p + "mlp.gate_proj.weight": weights(FFN, HIDDEN),
            p + "mlp.up_proj.weight": weights(FFN, HIDDEN),
            p + "mlp.down_proj.weight": weights(HIDDEN, FFN),
        }
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ascii", action="store_true", help="printable-ASCII tokens only")
    args = parser.parse_args()
    print(make(args.out, layers=args.layers, seed=args.seed, ascii_only=args.ascii))


if __name__ == "__main__":
    main()
