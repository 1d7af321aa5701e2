"""The kernels vLLM chose, read from its start-up log: the attention backend, the MoE
backend, the quantized linear (GEMM) kernels, the KV cache dtype and layout, the CUDA graph
mode and capture sizes, and every fallback it warned about.

The texts are vLLM's own, read in its sources (0.17.1, 0.32.0 and 0.33.0; file:line of 0.33
unless said) and in real logs (tests/service/logs/):

    attention   "Using %s attention backend out of potential backends: %s."  platforms/cuda.py:509
                "Using %s backend." (forced by --attention-backend: the enum's str,
                `AttentionBackendEnum.TRITON_MLA`; CPU MLA: `CPU_MLA`)  cuda.py:448, cpu.py:174
                The CPU platform picks CPU_ATTN for other models without a line (cpu.py:197):
                recorded as implied by `device_config=cpu`.
    MoE         "Using '%s' NvFp4 MoE backend out of potential backends: %s."  oracle/nvfp4.py:242
                "Using %s Fp8 MoE backend out of ..."  oracle/fp8.py:422; likewise Int8, WNA16,
                Mxfp4, MxFp8, W4A8; 0.32: "Using %s MoE backend" (the experts class);
                0.17.1: "Using %s backend for Unquantized MoE", "Using
                CompressedTensorsWNA16MarlinMoEMethod" (compressed_tensors_moe.py:191)
    linear      "Using %s for NVFP4 GEMM" (0.17.1: the enum, `NvFp4LinearBackend.FLASHINFER_CUTLASS`;
                0.32+: the kernel class)  kernels/linear/__init__.py:1303; also MXFP4/6/8
                "Selected %s for %s" (FP8/INT8 scaled-mm kernel for Fp8LinearMethod ...)  :869
                "Using %s for mixed-precision linear"; 0.17.1 "Using %s for GPTQMarlinLinearMethod"
    KV cache    `kv_cache_dtype=fp8` and `dtype=torch.bfloat16` in "Initializing a V1 LLM engine
                (v%s) with config: %s"  v1/engine/core.py:140; "Using %s data type to store kv
                cache."  config/cache.py:485; "Using %s KV cache layout."  attention/backends/utils.py:381
    CUDA graphs `'cudagraph_mode': <CUDAGraphMode.PIECEWISE: 1>`, `'cudagraph_capture_sizes': [...]`
                and `enforce_eager=True` in the config line; the tqdm bar "Capturing CUDA graphs
                (mixed prefill-decode, PIECEWISE): ... 67/67"  v1/worker/gpu_model_runner.py:6592
    fallbacks   "Your GPU does not have native support for FP4 computation but FP4 quantization is
                being used. Weight-only FP4 compression will be used leveraging the Marlin kernel.
                ..." (and FP8)  kernels/linear/nvfp4/marlin.py:34, utils/marlin_utils_fp4.py:342;
                any WARNING that falls back ("... not supported ... Falling back to ...", "NVFP4
                linear falling back to the slow and unoptimized emulation backend ..."); "Using
                default MoE config. Performance might be sub-optimal!" (no tuned config for the GPU)

The simulator prints the same lines (sim/startup.py). Pure: lines in, a JSON-able dict out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# vLLM's logger prefix: `(Worker_TP0 pid=1) WARNING 03-02 09:14:46 [cuda.py:367] message`,
# possibly behind a journald prefix; tqdm bars and uvicorn lines have none.
_PREFIX = re.compile(
    r"(?:^|[\s)])(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[[^\]]*\] (?P<message>.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_ATTENTION = re.compile(r"Using (\w+) attention backend out of potential backends: ([\[(].*?[\])])")
_ATTENTION_FORCED = re.compile(r"^Using (?:AttentionBackendEnum\.)?([A-Z][A-Z0-9_]*) backend\.\s*$")
_MOE = re.compile(r"Using '?(\w+)'? (?:([A-Za-z0-9]+(?: Int8)?) )?MoE backend(?! for)")
_MOE_UNQUANTIZED = re.compile(r"Using (\w+) backend for Unquantized MoE")
_MOE_METHOD = re.compile(r"^Using (CompressedTensors(\w*?)MoEMethod)\s*$")
_LINEAR = (
    re.compile(r"Using (?:\w+\.)?(\w+)(?: backend)? for (NVFP4|MXFP4|MXFP6|MXFP8) GEMM"),
    re.compile(r"Selected (\w+) for (\w+)"),
    re.compile(r"Using (\w+) for (mixed-precision linear|\w*LinearMethod|CompressedTensors\w+)\s*$"),
)
_KV_DTYPE = re.compile(r"\bkv_cache_dtype=(\w+)")
_KV_STORE = re.compile(r"Using (\w+) data type to store kv cache")
_KV_LAYOUT = re.compile(r"Using (\w+) KV cache layout\.")
_DTYPE = re.compile(r"\bdtype=torch\.(\w+)")
_DEVICE = re.compile(r"\bdevice_config=(\w+)")
_EAGER = re.compile(r"\benforce_eager=(True|False)")
_GRAPH_MODE = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(\w+)")
_GRAPH_SIZES = re.compile(r"'cudagraph_capture_sizes': \[([\d,\s]*)\]")
_CAPTURE = re.compile(r"Capturing CUDA graphs \(([^,)]+), (\w+)\).*?\|\s*\d+/(\d+)")
_MARLIN = re.compile(
    r"Your GPU does not have native support for (FP4|FP8) computation but \w+ quantization is "
    r"being used\. Weight-only \w+ compression will be used leveraging the Marlin kernel")
_FALLS_BACK = re.compile(r"fall(?:ing)? back|Falling back|Performance might be sub-optimal", re.I)



class KernelLog:
    """Feed it the start-up log's lines; `to_json()` says what vLLM chose (only what it
    printed: a key it said nothing about is absent)."""

    def __init__(self) -> None:
        self.attention: str | None = None
        self.attention_candidates: list[str] = []
        self.moe: str | None = None
        self.moe_kind: str | None = None
        self.linear: dict[str, str] = {}
        self.kv_cache_dtype: str | None = None
        self.dtype: str | None = None
        self.kv_cache_layout: str | None = None
        self.device: str | None = None
        self.eager: bool | None = None
        self.graph_mode: str | None = None
        self.graph_sizes: list[int] | None = None
        self.captured: dict[str, int] = {}
        self.fallbacks: list[str] = []

    def feed(self, lines: Iterable[str]) -> None:
        for raw in lines:
            self.line(raw)

    def line(self, raw: str) -> None:
        text = _ANSI.sub("", raw).rstrip()
        prefixed = _PREFIX.search(text)
        level = prefixed.group("level") if prefixed else None
        message = prefixed.group("message") if prefixed else text
        if "Initializing a V1 LLM engine" in message:
            self._config(message)
            return
        if (found := _ATTENTION.search(message)) is not None:
            self.attention = found.group(1)
            self.attention_candidates = re.findall(r"'(\w+)'", found.group(2))
        elif (found := _ATTENTION_FORCED.search(message)) is not None:
            self.attention = found.group(1)
        elif (found := _MOE.search(message)) is not None:
            self.moe, self.moe_kind = found.group(1), found.group(2)
        elif (found := _MOE_UNQUANTIZED.search(message)) is not None:
            self.moe, self.moe_kind = found.group(1), "Unquantized"
        elif (found := _MOE_METHOD.search(message)) is not None:
            self.moe, self.moe_kind = found.group(1), None
        elif (found := _KV_STORE.search(message)) is not None:
            self.kv_cache_dtype = found.group(1)
        elif (found := _KV_LAYOUT.search(message)) is not None:
            self.kv_cache_layout = found.group(1)
        elif (found := _CAPTURE.search(message)) is not None:
            self.captured[f"{found.group(1)}, {found.group(2)}"] = int(found.group(3))
        else:
            for pattern in _LINEAR:
                if (found := pattern.search(message)) is not None:
                    what = found.group(2)
                    self.linear[f"{what} GEMM" if what.isupper() else what] = found.group(1)
                    break
        if (found := _MARLIN.search(message)) is not None:
            self._fallback(f"{found.group(1)} weight-only Marlin: {message.strip()}")
        elif level in ("WARNING", "ERROR") and _FALLS_BACK.search(message):
            self._fallback(message.strip())

    def _fallback(self, text: str) -> None:
        if text not in self.fallbacks:  # every tensor-parallel worker says it once
            self.fallbacks.append(text)

    def _config(self, message: str) -> None:
        for pattern, name in ((_KV_DTYPE, "kv_cache_dtype"), (_DTYPE, "dtype"),
                              (_DEVICE, "device"), (_GRAPH_MODE, "graph_mode")):
            found = pattern.search(message)
            if found is not None and (name != "kv_cache_dtype" or self.kv_cache_dtype is None):
                setattr(self, name, found.group(1))
        eager = _EAGER.search(message)
        if eager is not None:
            self.eager = eager.group(1) == "True"
        sizes = _GRAPH_SIZES.search(message)
        if sizes is not None:
            self.graph_sizes = [int(s) for s in re.findall(r"\d+", sizes.group(1))]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.attention:
            out["attention"] = self.attention
            if self.attention_candidates:
                out["attention_candidates"] = self.attention_candidates
        elif self.device == "cpu":
            # vLLM's CPU platform returns CPU_ATTN for a non-MLA model without a line.
            out["attention"] = "CPU_ATTN"
            out["attention_implied"] = True
        if self.moe:
            out["moe"] = self.moe
            if self.moe_kind:
                out["moe_kind"] = self.moe_kind
        if self.linear:
            out["linear"] = dict(self.linear)
        if self.kv_cache_dtype:
            out["kv_cache_dtype"] = self.kv_cache_dtype
            if self.kv_cache_dtype == "auto" and self.dtype:
                out["kv_cache_dtype_resolved"] = self.dtype  # auto: the model's dtype
        if self.kv_cache_layout:
            out["kv_cache_layout"] = self.kv_cache_layout
        if self.device:
            out["device"] = self.device
        graphs: dict[str, Any] = {}
        if self.eager:
            graphs["mode"] = "eager (--enforce-eager)"
        elif self.graph_mode:
            graphs["mode"] = self.graph_mode
        if self.graph_sizes is not None:
            graphs["capture_sizes"] = self.graph_sizes
        if self.captured:
            graphs["captured"] = dict(self.captured)
        if graphs:
            out["cuda_graphs"] = graphs
        if self.fallbacks:
            out["fallbacks"] = list(self.fallbacks)
        return out


def read_kernels(text: str) -> dict[str, Any]:
    """What a whole start-up log says of the kernels (its last start-up if it holds several
    is the caller's to cut: the phase tracker starts a new reader at each banner)."""
    log = KernelLog()
    log.feed(re.split(r"\r\n|\r|\n", text))
    return log.to_json()
