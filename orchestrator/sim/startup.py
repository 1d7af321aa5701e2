"""The start-up log of `vllm serve` (facts §8.2), timed by the profile and the time scale.

Phases and their markers, in order: config resolution, engine and worker init (NCCL), model
load (safetensors shards), torch.compile, KV cache profiling, CUDA graph capture, API server
and uvicorn. Injected start-up failures happen where they happen in real life and print the
texts of `failures.py`. The durations printed are the wall-clock seconds that really passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from orchestrator.sim import failures
from orchestrator.sim.compile_cache import SimCompileCache
from orchestrator.sim.logs import VllmLog
from orchestrator.sim.options import SimOptions

ROUTES = (
    ("/health", "GET"), ("/ping", "GET, POST"), ("/version", "GET"), ("/load", "GET"),
    ("/metrics", "GET"), ("/v1/models", "GET"), ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
)  # fmt: skip


# vLLM's kernels (engines/vllm/kernels.py reads these lines): the NVFP4 GEMM kernel class
# 0.32+ names for each backend 0.17.1 names, and the warning of a GPU without native FP4
# (kernels/linear/nvfp4/marlin.py:34 in 0.33, utils/marlin_utils_fp4.py in 0.17.1).
NVFP4_KERNELS = {
    "FLASHINFER_CUTLASS": "FlashInferCutlassNvFp4LinearKernel",
    "FLASHINFER_TRTLLM": "FlashInferTrtllmNvFp4LinearKernel",
    "VLLM_CUTLASS": "CutlassNvFp4LinearKernel",
    "MARLIN": "MarlinNvFp4LinearKernel",
}
MARLIN_FP4_WARNING = (
    "Your GPU does not have native support for FP4 computation but FP4 quantization is being "
    "used. Weight-only FP4 compression will be used leveraging the Marlin kernel. This may "
    "degrade performance for compute-heavy workloads.")


def graph_sizes(max_size: int = 512) -> list[int]:
    """vLLM's default CUDA graph capture sizes: 1, 2, 4, then every 8 up to the largest."""
    return [1, 2, 4, *range(8, max_size + 1, 8)]


class StartupFailed(Exception):
    """The injected failure has been printed; the process exits with `code`."""

    def __init__(self, code: int = 1) -> None:
        super().__init__(code)
        self.code = code


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def tqdm_line(desc: str, done: int, total: int, elapsed: float) -> str:
    """vLLM's tqdm bar format for checkpoint shards."""
    percent = 100 * done / total if total else 100
    if done == 0:
        return f"{desc}: {percent:3.0f}% Completed | {done}/{total} [00:00<?, ?it/s]"
    per = elapsed / done
    remaining = per * (total - done)
    rate = f"{per:5.2f}s/it" if per >= 1 else f"{1 / per if per else 0:5.2f}it/s"
    return (
        f"{desc}: {percent:3.0f}% Completed | {done}/{total} "
        f"[{_clock(elapsed)}<{_clock(remaining)}, {rate}]"
    )


class Startup:
    def __init__(
        self, options: SimOptions, log: VllmLog, listen: Callable[[], Awaitable[None]]
    ) -> None:
        self.o = options
        self.log = log
        self.listen = listen
        self.scale = options.startup_time_scale
        self.engine = options.version.engine_process
        tp = options.tensor_parallel
        self.worker = "Worker_TP0" if tp > 1 else None
        self.model_proc = self.worker or self.engine
        self.tp = tp
        self._compile_took = 0.0
        self._due: float | None = None

    async def _sleep(self, model_seconds: float, wall_seconds: float = 0.0) -> None:
        """Sleep until the phase's due time, so that many short sleeps do not drift."""
        now = time.monotonic()
        if self._due is None:
            self._due = now
        self._due += model_seconds * self.scale + wall_seconds
        if self._due > now:
            await asyncio.sleep(self._due - now)

    def _fail(self, kind: str, exception: str) -> None:
        failures.report_worker_failure(self.log, self.worker, self.engine, kind, exception)
        raise StartupFailed(1)

    async def run(self) -> None:
        """Print the phases, call `listen` at the end; raise StartupFailed on injection."""
        times = self.o.profile.startup
        await self._sleep(times.init * 0.2)
        if self.o.fail_at_startup == "trust-remote-code":
            failures.report_api_failure(self.log, failures.CONFIG_FRAMES,
                                        failures.TRUST_REMOTE_CODE)
            raise StartupFailed(1)
        self._config_lines()
        await self._sleep(times.init * 0.4)
        await self._init_workers()
        proc = self.model_proc
        await self._load_model(proc)
        await self._compile(proc)
        started = time.monotonic()
        await self._sleep(times.kv_profile)
        self._kv_profile(proc)
        await self._cuda_graphs(proc)
        init_took = time.monotonic() - started + self._compile_took
        self.log.info(self.engine, "core.py:282",
                      f"init engine (profile, create kv cache, warmup model) took {init_took:.2f} seconds")  # fmt: skip
        await self._sleep(times.api)
        await self._api_server()

    def _config_lines(self) -> None:
        """The API server resolves the config; the engine says what it starts with."""
        o, log, api = self.o, self.log, "APIServer"
        log.info(api, "model.py:531", f"Resolved architecture: {o.profile.architecture}")
        log.info(api, "model.py:1554", f"Using max model len {o.max_model_len}")
        log.info(api, "scheduler.py:231",
                 f"Chunked prefill is enabled with max_num_batched_tokens={o.max_num_batched_tokens}.")  # fmt: skip
        log.info(api, "vllm.py:747", "Asynchronous scheduling is enabled.")
        self._kv_dtype_line(api)
        log.info(self.engine, "core.py:101",
                 f"Initializing a V1 LLM engine (v{o.version.text}) with config: model='{o.model}', "
                 f"speculative_config=None, tokenizer='{o.model}', skip_tokenizer_init=False, "
                 f"tokenizer_mode=auto, trust_remote_code=True, dtype=torch.bfloat16, "
                 f"max_seq_len={o.max_model_len}, tensor_parallel_size={self.tp}, "
                 f"enforce_eager=False, kv_cache_dtype={o.cache_dtype}, "
                 f"device_config={'cpu' if self.cpu else 'cuda'}, "
                 f"served_model_name={o.served_names[0]}, enable_prefix_caching=True, "
                 f"compilation_config={self._compilation_config()}")  # fmt: skip

    async def _init_workers(self) -> None:
        """With tensor parallelism: one worker per rank and NCCL (where `nccl` fails)."""
        log, profile, fail = self.log, self.o.profile, self.o.fail_at_startup
        if self.worker is None:
            if fail == "nccl":
                self._fail("nccl", failures.NCCL_ERROR)
            return
        log.info(self.engine, "multiproc_executor.py:136",
                 f"world_size={self.tp}, local_world_size={self.tp}")  # fmt: skip
        for rank in range(self.tp):
            log.info(f"Worker_TP{rank}", "parallel_state.py:1393",
                     f"world_size={self.tp} rank={rank} local_rank={rank} "
                     f"distributed_init_method=tcp://127.0.0.1:29501 backend=nccl")  # fmt: skip
        log.info(self.worker, "pynccl.py:111", "vLLM is using nccl==2.27.5")
        await self._sleep(profile.startup.init * 0.4)
        if fail == "nccl":
            self._fail("nccl", failures.NCCL_ERROR)
        if profile.pcie_only and self.tp > 2:
            log.warning(self.worker, "custom_all_reduce.py:154",
                        "Custom allreduce is disabled because it's not supported on more than "
                        "two PCIe-only GPUs. To silence this warning, specify "
                        "disable_custom_all_reduce=True explicitly.")  # fmt: skip

    async def _load_model(self, proc: str) -> None:
        """The attention backend, the kernels, then the weights shard by shard."""
        o, log, profile = self.o, self.log, self.o.profile
        backend = profile.attention_backend
        if not self.cpu:  # vLLM's CPU platform picks CPU_ATTN without a line
            candidates = ", ".join(f"'{b}'" for b in profile.attention_candidates or (backend,))
            log.info(proc, "cuda.py:405",
                     f"Using {backend} attention backend out of potential backends: [{candidates}].")  # fmt: skip
        log.info(proc, "gpu_model_runner.py:4281", f"Starting to load model {o.model}...")
        if o.fail_at_startup == "flashinfer-mismatch":
            self._fail("flashinfer-mismatch", failures.FLASHINFER_MISMATCH)
        self._kernel_lines(proc)
        await self._load_weights(proc)
        if profile.fp4_marlin_fallback:
            log.warning(proc, "marlin.py:34" if o.version.new_wording else "marlin_utils_fp4.py:151",
                        MARLIN_FP4_WARNING)

    def _kv_profile(self, proc: str) -> None:
        """The memory left for the KV cache (where `kv-cache` fails) and what it holds."""
        log, profile = self.log, self.o.profile
        if self.o.fail_at_startup == "kv-cache":
            log.info(proc, "gpu_worker.py:424", "Available KV cache memory: -1.37 GiB")
            self._fail("kv-cache", failures.NO_KV_MEMORY)
        log.info(proc, "gpu_worker.py:424", f"Available KV cache memory: {profile.kv_cache_gib:.2f} GiB")
        self._kv_lines()

    @property
    def cpu(self) -> bool:
        return self.o.profile.attention_backend == "CPU_ATTN"

    def _compilation_config(self) -> str:
        """The part of vLLM's config line that says how CUDA graphs are captured."""
        if self.cpu:
            return ("{'mode': <CompilationMode.DYNAMO_TRACE_ONCE: 2>, 'backend': 'inductor', "
                    "'cudagraph_mode': <CUDAGraphMode.NONE: 0>, 'cudagraph_capture_sizes': [], "
                    "'max_cudagraph_capture_size': None}")
        sizes = graph_sizes()
        return ("{'mode': <CompilationMode.VLLM_COMPILE: 3>, 'backend': 'inductor', "
                "'cudagraph_mode': <CUDAGraphMode.PIECEWISE: 1>, "
                f"'cudagraph_capture_sizes': [{', '.join(map(str, sizes))}], "
                f"'max_cudagraph_capture_size': {max(sizes)}}}")

    def _kv_dtype_line(self, proc: str) -> None:
        """config/cache.py: a quantized KV cache is said once, as the config is made."""
        dtype = self.o.cache_dtype
        if dtype in ("auto", "bfloat16", "float16"):
            return
        if self.o.version.new_wording:
            self.log.info(proc, "cache.py:485",
                          f"Using {dtype} data type to store kv cache. It reduces the GPU memory "
                          "footprint and boosts the performance. Meanwhile, it may cause accuracy "
                          "drop without a proper scaling factor")  # fmt: skip
        elif dtype.startswith("fp8"):  # 0.17.1 says it of the fp8 caches only
            self.log.info(proc, "cache.py:224",
                          "Using fp8 data type to store kv cache. It reduces the GPU memory "
                          "footprint and boosts the performance. Meanwhile, it may cause accuracy "
                          "drop without a proper scaling factor.")  # fmt: skip

    def _kernel_lines(self, proc: str) -> None:
        """The MoE oracle's choice and the quantized linear kernels, as vLLM names them."""
        profile, log, new = self.o.profile, self.log, self.o.version.new_wording
        moe = profile.moe_backend
        if moe and profile.moe_kind == "NvFp4":
            log.info(proc, "nvfp4.py:242" if new else "nvfp4.py:162",
                     f"Using '{moe}' NvFp4 MoE backend out of potential backends: "
                     "['FLASHINFER_TRTLLM', 'FLASHINFER_CUTEDSL', 'FLASHINFER_CUTLASS', "
                     "'VLLM_CUTLASS', 'MARLIN'].")  # fmt: skip
        elif moe and profile.moe_kind == "Fp8":
            log.info(proc, "fp8.py:422" if new else "fp8.py:231",
                     f"Using {moe} Fp8 MoE backend out of potential backends: ['AITER', "
                     "'FLASHINFER_TRTLLM', 'FLASHINFER_CUTLASS', 'DEEPGEMM', 'VLLM_CUTLASS', "
                     "'TRITON', 'MARLIN', 'BATCHED_DEEPGEMM', 'BATCHED_VLLM_CUTLASS', "
                     "'BATCHED_TRITON', 'XPU'].")  # fmt: skip
        elif moe and profile.moe_kind == "WNA16":
            if new:
                log.info(proc, "int_wna16.py:287", f"Using '{moe}' WNA16 MoE backend.")
            else:  # 0.17.1 names the compressed-tensors method it picked
                log.info(proc, "compressed_tensors_moe.py:191",
                         "Using CompressedTensorsWNA16MarlinMoEMethod")
        if profile.nvfp4_gemm:
            kernel = NVFP4_KERNELS.get(profile.nvfp4_gemm, profile.nvfp4_gemm) if new else \
                f"NvFp4LinearBackend.{profile.nvfp4_gemm}"
            log.info(proc, "__init__.py:1303" if new else "nvfp4_utils.py:85",
                     f"Using {kernel} for NVFP4 GEMM")
        if profile.fp8_linear:
            log.info(proc, "__init__.py:779" if new else "__init__.py:258",
                     f"Selected {profile.fp8_linear} for Fp8LinearMethod")

    async def _load_weights(self, proc: str) -> None:
        times, log = self.o.profile.startup, self.log
        started = time.monotonic()
        shards = max(1, times.shards)
        per_shard = times.weights / shards
        extra = self.o.slow_start / shards  # wall seconds, not scaled
        desc = "Loading safetensors checkpoint shards"
        log.raw(proc, tqdm_line(desc, 0, shards, 0.0))
        for done in range(1, shards + 1):
            await self._sleep(per_shard, extra)
            if self.o.fail_at_startup == "cuda-oom" and done == int(shards * 0.6) + 1:
                log.error(proc, "gpu_model_runner.py:4362", failures.CUDA_OOM_NOTE)
                self._fail("cuda-oom", failures.CUDA_OOM)
            log.raw(proc, tqdm_line(desc, done, shards, time.monotonic() - started))
        took = time.monotonic() - started
        log.info(proc, "default_loader.py:293", f"Loading weights took {took:.2f} seconds")
        log.info(proc, "gpu_model_runner.py:4364",
                 f"Model loading took {self.o.profile.weights_gib:g} GiB memory and "
                 f"{took + 0.01:.6f} seconds")  # fmt: skip

    async def _compile(self, proc: str) -> None:
        times, log = self.o.profile.startup, self.log
        started = time.monotonic()
        cache = SimCompileCache.of(self.o)
        log.info(proc, "backends.py:916",
                 f"Using cache directory: {cache.shown()} for vLLM's torch.compile")
        if self.o.version.new_wording:
            log.info(proc, "monitor.py:34", "Starting torch.compile")
        await self._sleep(times.dynamo)
        dynamo = time.monotonic() - started
        log.info(proc, "backends.py:976", f"Dynamo bytecode transform time: {dynamo:.2f} s")
        await self._compile_graph(proc, cache)
        total = time.monotonic() - started
        self._compile_took = total
        if self.o.version.new_wording:
            log.info(proc, "monitor.py:48", f"torch.compile took {total:.2f} s in total")
        else:
            log.info(proc, "monitor.py:35", f"torch.compile takes {total:.2f} s in total")

    async def _compile_graph(self, proc: str, cache: SimCompileCache) -> None:
        """The graph loaded from the compile cache (a warm start: no compile time), or compiled
        and saved there (sim/compile_cache.py)."""
        before = time.monotonic()
        compile_range = f"(1, {self.o.max_num_batched_tokens})"
        if cache.warm():
            self.log.info(proc, "backends.py:296",
                          f"Directly load the compiled graph(s) for compile range {compile_range} "
                          f"from the cache, took {time.monotonic() - before:.3f} s")
            return
        await self._sleep(self.o.profile.startup.compile)
        cache.save()
        self.log.info(proc, "backends.py:366", f"Compiling a graph for compile range "
                                               f"{compile_range} takes {time.monotonic() - before:.2f} s")

    def _kv_lines(self) -> None:
        o, log = self.o, self.log
        tokens = o.kv_cache_tokens  # at --kv-cache-dtype
        concurrency = tokens / o.max_model_len
        if o.version.new_wording:
            log.info(self.engine, "kv_cache_utils.py:1291",
                     f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
                     f"{o.max_model_len:,} tokens per request: {concurrency:.2f}x")  # fmt: skip
        else:
            log.info(self.engine, "kv_cache_utils.py:1314", f"GPU KV cache size: {tokens:,} tokens")
            log.info(self.engine, "kv_cache_utils.py:1319",
                     f"Maximum concurrency for {o.max_model_len:,} tokens per request: "
                     f"{concurrency:.2f}x")  # fmt: skip

    async def _cuda_graphs(self, proc: str) -> None:
        times, log = self.o.profile.startup, self.log
        started = time.monotonic()
        total = len(graph_sizes())
        desc = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
        for done in (0, total // 2, total):
            if done:
                await self._sleep(times.cuda_graphs / 2)
            elapsed = time.monotonic() - started
            bar = "█" * (10 * done // total) + " " * (10 - 10 * done // total)
            log.raw(proc, f"{desc}: {100 * done // total:3d}%|{bar}| {done}/{total} "
                          f"[{_clock(elapsed)}<00:00, {done / elapsed if elapsed else 0:.2f}it/s]")  # fmt: skip
        took = time.monotonic() - started
        log.info(proc, "gpu_model_runner.py:5386",
                 f"Graph capturing finished in {took:.0f} secs, took 1.23 GiB")  # fmt: skip

    async def _api_server(self) -> None:
        o, log = self.o, self.log
        api = "APIServer"
        host = o.host if ":" not in o.host else f"[{o.host}]"
        log.info(api, "api_server.py:495", "Supported tasks: ['generate']")
        if o.version.new_wording:
            log.info(api, "api_server.py:500", f"Starting vLLM server on http://{host}:{o.port}")
        else:
            log.info(api, "api_server.py:500", f"Starting vLLM API server 0 on http://{host}:{o.port}")
        log.info(api, "launcher.py:38", "Available routes are:")
        for path, methods in ROUTES:
            log.info(api, "launcher.py:47", f"Route: {path}, Methods: {methods}")
        log.uvicorn(f"Started server process [{log.pid}]")
        log.uvicorn("Waiting for application startup.")
        await self.listen()
        log.uvicorn("Application startup complete.")
