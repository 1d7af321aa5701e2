"""What a start-up's kernel choices say, whichever engine's log they were read from: the
record an engine's start-up reader keeps (startup.json's `facts.kernels`: attention, MoE,
linear kernels, KV cache dtype and layout, CUDA graphs, fallbacks), described in one line for
the live view, `orch status`, the report and `orch compare`. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FALLBACK_FIX = ("the GPU or the installed kernels lack the fast path: check the GPU's compute "
                "capability against the quantization, the FlashInfer/CUTLASS packages, or choose "
                "the backend explicitly (--moe-backend, --linear-backend, --attention-backend)")


def _sizes(sizes: list[int]) -> str:
    if not sizes:
        return "none"
    if len(sizes) <= 4:
        return ", ".join(str(s) for s in sizes)
    return f"{len(sizes)} sizes, {min(sizes)}..{max(sizes)}"


def describe_graphs(graphs: Mapping[str, Any]) -> str | None:
    mode = graphs.get("mode")
    sizes = graphs.get("capture_sizes")
    captured = graphs.get("captured")
    if mode == "NONE" or (mode is None and sizes == [] and not captured):
        return "none"
    detail = ""
    if isinstance(sizes, list) and sizes:
        detail = _sizes(sizes)
    elif isinstance(captured, dict) and captured:
        detail = ", ".join(f"{n} captured ({kind})" for kind, n in captured.items())
    if mode and detail:
        return f"{mode} ({detail})"
    return str(mode or detail) or None


def describe(kernels: Mapping[str, Any] | None, *, fallbacks: bool = True) -> str:
    """One line: `attention TRITON_MLA; MoE FLASHINFER_CUTLASS (NvFp4); NVFP4 GEMM
    FlashInferCutlassNvFp4LinearKernel; KV cache fp8; CUDA graphs PIECEWISE (67 sizes, 1..512)`,
    then `; FALLBACK: ...` for each fallback."""
    if not kernels:
        return "-"
    parts = []
    if kernels.get("attention"):
        implied = " (implied)" if kernels.get("attention_implied") else ""
        parts.append(f"attention {kernels['attention']}{implied}")
    if kernels.get("moe"):
        kind = f" ({kernels['moe_kind']})" if kernels.get("moe_kind") else ""
        parts.append(f"MoE {kernels['moe']}{kind}")
    for what, kernel in (kernels.get("linear") or {}).items():
        parts.append(f"{what} {kernel}")
    if kernels.get("kv_cache_dtype"):
        resolved = kernels.get("kv_cache_dtype_resolved")
        layout = f", {kernels['kv_cache_layout']} layout" if kernels.get("kv_cache_layout") else ""
        parts.append(f"KV cache {kernels['kv_cache_dtype']}" + (f" ({resolved})" if resolved else "")
                     + layout)
    graphs = describe_graphs(kernels.get("cuda_graphs") or {})
    if graphs:
        parts.append(f"CUDA graphs {graphs}")
    if fallbacks:
        parts += [f"FALLBACK: {short_fallback(f)}" for f in kernels.get("fallbacks") or ()]
    return "; ".join(parts) or "-"


def short_fallback(text: str) -> str:
    """A fallback in a few words (the Marlin one by its kind, others cut at 100 characters)."""
    head, sep, _ = text.partition(":")
    if sep and head.endswith("weight-only Marlin"):
        return head
    return text if len(text) <= 100 else text[:97] + "..."


def fallbacks_of(kernels: Mapping[str, Any] | None) -> list[str]:
    found = (kernels or {}).get("fallbacks")
    return [str(f) for f in found] if isinstance(found, list) else []
