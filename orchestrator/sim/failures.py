"""Crash texts (facts §9) and the way vLLM's processes report them in the log.

Root causes are quoted exactly as vLLM, torch, FlashInfer and Python print them, so that log
diagnosis can be tested against the simulator. The stack frames around them are plausible,
not copied from a real run: only the exception lines are signatures.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.sim.logs import VllmLog

SITE = "/opt/vllm/.venv/lib/python3.12/site-packages"
DOCS = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"

FLASHINFER_MISMATCH = (
    "RuntimeError: flashinfer-cubin version (0.6.3) does not match flashinfer version (0.6.4). "
    "Please install the same version of both packages. "
    "Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check."
)
CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 94.97 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process "
    "has 93.90 GiB memory in use. Of the allocated memory 91.48 GiB is allocated by PyTorch, and "
    "1.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
    "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
    "See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
CUDA_OOM_NOTE = (
    "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free "
    "memory for weights, increasing --tensor-parallel-size, or using --quantization. See "
    f"{DOCS} for more tips. (original error: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 94.97 GiB of which 1.06 GiB is free.)"
)
NO_KV_MEMORY = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    f"`gpu_memory_utilization` when initializing the engine. See {DOCS} for more details."
)
NCCL_ERROR = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
TRUST_REMOTE_CODE = (
    "RuntimeError: Failed to load the model config. If the model is a custom model not yet "
    "available in the HuggingFace transformers library, consider setting "
    "`trust_remote_code=True` in LLM or using the `--trust-remote-code` flag in the CLI."
)
PORT_IN_USE = "OSError: [Errno 98] Address already in use"
WORKER_INIT_FAILED = (
    "Exception: WorkerProc initialization failed due to an exception in a background process. "
    "See stack trace for root cause."
)
ILLEGAL_MEMORY_ACCESS = (
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
)
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."


def engine_init_failed(engine_proc: str) -> str:
    return (
        "RuntimeError: Engine core initialization failed. See root cause above. "
        f"Failed core proc(s): {{'{engine_proc}': 1}}"
    )


@dataclass(frozen=True)
class Frame:
    path: str  # relative to the vllm package, or absolute
    line: int
    func: str
    code: str

    def render(self) -> list[str]:
        path = self.path if self.path.startswith("/") else f"{SITE}/vllm/{self.path}"
        return [f'  File "{path}", line {self.line}, in {self.func}', f"    {self.code}"]


def traceback_lines(frames: list[Frame], exception: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        lines.extend(frame.render())
    lines.extend(exception.split("\n"))
    return lines


CLI_FRAMES = [
    Frame("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
    Frame("entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    Frame("entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
    Frame("entrypoints/openai/api_server.py", 1421, "run_server", "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
]  # fmt: skip

ROOT_FRAMES: dict[str, list[Frame]] = {
    "flashinfer-mismatch": [
        Frame("model_executor/layers/fused_moe/oracle/nvfp4.py", 212, "select_nvfp4_moe_backend", "from vllm.utils.flashinfer import has_flashinfer_cutlass_fused_moe"),
        Frame(f"{SITE}/flashinfer/jit/env.py", 87, "<module>", "FLASHINFER_CUBIN_DIR = _get_cubin_dir()"),
        Frame(f"{SITE}/flashinfer/jit/env.py", 61, "_get_cubin_dir", "raise RuntimeError("),
    ],
    "cuda-oom": [
        Frame("model_executor/model_loader/default_loader.py", 302, "load_weights", "loaded_weights = model.load_weights(self.get_all_weights(model_config, model))"),
        Frame("model_executor/model_loader/weight_utils.py", 557, "safetensors_weights_iterator", "param = f.get_tensor(name)"),
    ],
    "nccl": [
        Frame("distributed/parallel_state.py", 1251, "init_distributed_environment", "torch.distributed.barrier()"),
        Frame("distributed/device_communicators/pynccl_wrapper.py", 396, "NCCL_CHECK", 'raise RuntimeError(f"NCCL error: {error_str}")'),
    ],
    "kv-cache": [
        Frame("v1/core/kv_cache_utils.py", 712, "check_enough_kv_cache_memory", "raise ValueError("),
    ],
}  # fmt: skip


def report_worker_failure(
    log: VllmLog, worker: str | None, engine: str, kind: str, exception: str
) -> None:
    """Root cause in the worker (or the engine), the engine's wrapper, the API server's error."""
    frames = ROOT_FRAMES.get(kind, [])
    if worker is not None:
        log.error(worker, "multiproc_executor.py:743", "WorkerProc failed to start.")
        worker_frames = [
            Frame("v1/executor/multiproc_executor.py", 714, "worker_main", "worker = WorkerProc(*args, **kwargs)"),
            Frame("v1/worker/gpu_worker.py", 255, "init_device", "init_worker_distributed_environment(self.vllm_config, self.rank,"),
            *frames,
        ]  # fmt: skip
        log.error(worker, "multiproc_executor.py:743", "\n".join(traceback_lines(worker_frames, exception)))
        engine_exception = WORKER_INIT_FAILED
        engine_frames = [
            Frame("v1/executor/multiproc_executor.py", 140, "_init_executor", "self.workers = WorkerProc.wait_for_ready(unready_workers)"),
            Frame("v1/executor/multiproc_executor.py", 620, "wait_for_ready", "raise e from None"),
        ]  # fmt: skip
    else:
        engine_exception = exception
        engine_frames = frames
    log.error(engine, "core.py:866", "EngineCore failed to start.")
    core_frames = [
        Frame("v1/engine/core.py", 857, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
        Frame("v1/engine/core.py", 630, "__init__", "super().__init__("),
        *engine_frames,
    ]  # fmt: skip
    log.error(engine, "core.py:866", "\n".join(traceback_lines(core_frames, engine_exception)))
    log.raw(engine, f"Process {engine}:")
    api_frames = [
        *CLI_FRAMES,
        Frame("v1/engine/async_llm.py", 135, "__init__", "self.engine_core = EngineCoreClient.make_async_mp_client("),
        Frame("v1/engine/utils.py", 933, "wait_for_engine_startup", "raise RuntimeError("),
    ]  # fmt: skip
    log.raw("APIServer", "\n".join(traceback_lines(api_frames, engine_init_failed(engine))), stderr=True)


def report_api_failure(log: VllmLog, frames: list[Frame], exception: str) -> None:
    """An uncaught exception in the API server process itself (port, model config)."""
    log.raw("APIServer", "\n".join(traceback_lines([*CLI_FRAMES, *frames], exception)), stderr=True)


PORT_FRAMES = [
    Frame("entrypoints/openai/api_server.py", 1335, "setup_server", "sock = create_server_socket(sock_addr)"),
    Frame("entrypoints/openai/api_server.py", 1297, "create_server_socket", "sock.bind(addr)"),
]  # fmt: skip

CONFIG_FRAMES = [
    Frame("engine/arg_utils.py", 1215, "create_model_config", "return ModelConfig("),
    Frame("config/model.py", 462, "__post_init__", "hf_config = get_config("),
    Frame("transformers_utils/config.py", 621, "get_config", "raise RuntimeError(err_msg) from e"),
]  # fmt: skip


def report_runtime_crash(log: VllmLog, engine: str, reason: str) -> None:
    """The engine dies while serving (--crash-after-requests)."""
    log.error(engine, "core.py:1010", "EngineCore encountered a fatal error.")
    frames = [
        Frame("v1/engine/core.py", 1001, "run_busy_loop", "self._process_engine_step()"),
        Frame("v1/engine/core.py", 1034, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        Frame("v1/executor/multiproc_executor.py", 310, "execute_model", "return self.collective_rpc("),
    ]  # fmt: skip
    log.error(engine, "core.py:1010", "\n".join(traceback_lines(frames, ILLEGAL_MEMORY_ACCESS)))
    log.error("APIServer", "core_client.py:564", f"Engine core proc {engine} died unexpectedly, shutting down client.")
    log.error("APIServer", "async_llm.py:480", f"AsyncLLM output_handler failed.\nvllm.v1.engine.exceptions.EngineDeadError: {ENGINE_DEAD}")
    log.warning("APIServer", "simulator.py:1", f"orch simulator: injected crash ({reason})")
