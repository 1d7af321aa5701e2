"""How a model is deployed: vLLM's parallelism and memory flags, as the what-if model reads
them from a plan's `service.args` or the simulator's command line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Bytes per KV element of each --kv-cache-dtype (vLLM's CacheDType; `auto` is the model's
# bf16, the quantized ones one byte or half of one, their scales left out).
KV_DTYPE_BYTES: dict[str, float] = {
    "auto": 2.0, "bfloat16": 2.0, "float16": 2.0,
    "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0, "fp8_ds_mla": 1.0,
    "fp8_per_token_head": 1.0, "int8_per_token_head": 1.0, "turboquant_k8v4": 0.75,
    "int4_per_token_head": 0.5, "nvfp4": 0.5, "nvfp4_4over6": 0.5, "nvfp4_ds_mla": 0.5,
    "turboquant_4bit_nc": 0.5, "ultraquant_4bit": 0.5, "turboquant_k3v4_nc": 0.4375,
    "turboquant_3bit_nc": 0.375,
}  # fmt: skip


@dataclass(frozen=True)
class Deployment:
    tp: int = 1  # --tensor-parallel-size
    pp: int = 1  # --pipeline-parallel-size
    dp: int = 1  # --data-parallel-size: engine replicas, each with its own scheduler
    ep: bool = False  # --enable-expert-parallel: experts spread over tp x dp GPUs
    max_num_seqs: int = 256  # per replica
    max_num_batched_tokens: int = 8192  # per replica and step
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 131_072

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ep_size(self) -> int:
        """GPUs one expert layer's experts are spread over (tp when EP is off: each expert is
        then cut in tp slices, which reads the same bytes per GPU)."""
        return self.tp * self.dp if self.ep else self.tp

    def label(self) -> str:
        parts = [f"TP{self.tp}"] + [f"PP{self.pp}"] * (self.pp > 1) + [f"DP{self.dp}"] * (self.dp > 1)
        return " x ".join(parts) + (" + EP" if self.ep else "")


_FIELDS = {
    "tensor-parallel-size": "tp", "tp": "tp", "pipeline-parallel-size": "pp", "pp": "pp",
    "data-parallel-size": "dp", "dp": "dp", "enable-expert-parallel": "ep", "ep": "ep",
    "max-num-seqs": "max_num_seqs", "max-num-batched-tokens": "max_num_batched_tokens",
    "kv-cache-dtype": "kv_cache_dtype", "gpu-memory-utilization": "gpu_memory_utilization",
    "max-model-len": "max_model_len",
}  # fmt: skip


def _value(field: str, raw: object) -> object:
    if field == "ep":
        return raw is None or raw is True or str(raw).lower() in ("true", "1", "yes")
    if field == "kv_cache_dtype":
        text = str(raw)
        if text not in KV_DTYPE_BYTES:
            raise ValueError(f"--kv-cache-dtype {text!r} is not one of {', '.join(KV_DTYPE_BYTES)}")
        return text
    if field == "gpu_memory_utilization":
        return float(str(raw))
    text = str(raw).strip().lower()
    scale = {"k": 1000, "m": 1_000_000}.get(text[-1:], 1)
    number = int(float(text.rstrip("km")) * scale)
    if number < 1:
        raise ValueError(f"expected a whole number of at least 1, got {raw!r}")
    return number


def with_flags(base: Deployment, flags: Mapping[str, object]) -> Deployment:
    """`base` with the vLLM flags of `flags` (names without dashes in front; a bare flag's value
    None or True) that the what-if model reads; the others are left out."""
    changes: dict[str, object] = {}
    for name, raw in flags.items():
        field = _FIELDS.get(name.lstrip("-").replace("_", "-"))
        if field is None or raw is False:
            continue
        if field == "max_model_len" and str(raw).lower() in ("auto", "-1"):
            continue
        try:
            changes[field] = _value(field, raw)
        except ValueError as error:
            raise ValueError(f"--{name}: {error}") from None
    return Deployment(**{**base.__dict__, **changes})  # type: ignore[arg-type]
