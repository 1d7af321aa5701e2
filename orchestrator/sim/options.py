"""`orch sim serve` arguments: the simulator's own flags plus any `vllm serve` flag.

Flags the simulator does not model (compilation-config, attention-backend, ...) are
accepted permissively as `--flag`, `--flag value` or `--flag=value` and reported once in the
log, so one plan's service section can launch either engine. The deployment's flags are
modelled (sim/deployment.py, through the what-if model): --tensor-parallel-size,
--data-parallel-size, --enable-expert-parallel, --gpu-memory-utilization (read from the
accepted vLLM flags), --pipeline-parallel-size, --max-num-seqs, --max-num-batched-tokens,
--kv-cache-dtype and --max-model-len set the profile's step costs, KV cache and GPU figures;
a deployment whose weights do not fit fails at start-up as vLLM does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from orchestrator.sim import disagg
from orchestrator.sim.argtypes import json_object, positive
from orchestrator.sim.deployment import MODELLED_FLAGS, Deployed, deploy
from orchestrator.sim.profiles import (
    DEFAULT_PROFILE,
    PROFILES,
    Profile,
    get_profile,
    kv_cache_tokens,
)
from orchestrator.sim.versions import DEFAULT_VLLM_VERSION, VllmVersion, parse_version
from orchestrator.whatif.deployment import KV_DTYPE_BYTES

FAILURES = ("flashinfer-mismatch", "cuda-oom", "kv-cache", "nccl", "trust-remote-code", "port-in-use")

# vLLM 0.17.1 reasoning parser names (facts §7).
REASONING_PARSERS = (
    "deepseek_r1", "deepseek_v3", "ernie45", "glm45", "openai_gptoss", "granite", "holo2",
    "hunyuan_a13b", "kimi_k2", "minimax_m2", "minimax_m2_append_think", "mistral",
    "nemotron_v3", "olmo3", "qwen3", "seed_oss", "step3", "step3p5",
)  # fmt: skip
# Parsers that leave the reasoning inside the content (facts §3.2).
CONTENT_REASONING_PARSERS = ("minimax_m2_append_think",)

# vLLM flags that take no value; any other unknown flag takes the next token if it is one.
_BARE_FLAGS = {
    "trust-remote-code", "enable-auto-tool-choice", "enable-expert-parallel", "ep",
    "enforce-eager", "async-scheduling", "language-model-only",
    "data-parallel-hybrid-lb", "data-parallel-external-lb", "enable-request-id-headers",
    "enable-server-load-tracking", "enable-prompt-tokens-details", "enable-log-requests",
    "disable-log-requests", "disable-uvicorn-access-log", "fail-on-environ-validation",
    "enable-chunked-prefill", "enable-prefix-caching", "disable-custom-all-reduce",
    "enable-lora", "enable-sleep-mode", "disable-fastapi-docs", "enable-eplb",
}  # fmt: skip
_BARE_PREFIXES = ("no-", "disable-")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


@dataclass(frozen=True)
class SimOptions:
    model: str
    served_names: list[str]
    host: str
    port: int
    profile: Profile
    max_num_seqs: int
    max_model_len: int
    max_num_batched_tokens: int
    reasoning_parser: str | None
    api_key: str | None
    version: VllmVersion
    time_scale: float
    startup_time_scale: float
    fail_at_startup: str | None = None
    crash_after_requests: int | None = None
    hang_after_requests: int | None = None
    slow_start: float = 0.0
    force_include_usage: bool = False
    default_template_kwargs: dict[str, Any] = field(default_factory=dict)
    log_stats: bool = True
    ignored: list[tuple[str, str | None]] = field(default_factory=list)
    non_default: dict[str, Any] = field(default_factory=dict)
    # Several nodes (sim/cluster.py): Ray, or vLLM's multi-process mode.
    distributed_backend: str | None = None
    pipeline_parallel: int = 1
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29501
    headless: bool = False
    kv_cache_dtype: str = ""  # "" = the profile's (what its deployment passed)
    data_parallel: int = 1  # engine replicas sharing the requests (one scheduler, DP x limits)
    memory_note: str = ""  # why the deployment does not fit, when it does not
    deployment_modelled: bool = False  # the profile is a measured deployment: TP, DP, EP count
    kv_transfer: disagg.KvTransfer | None = None  # --kv-transfer-config: P/D (sim/disagg.py)

    @property
    def engine_max_num_seqs(self) -> int:
        return self.max_num_seqs * self.data_parallel

    @property
    def engine_kv_tokens(self) -> int:
        return self.kv_cache_tokens * self.data_parallel

    @property
    def engine_batched_tokens(self) -> int:
        return self.max_num_batched_tokens * self.data_parallel

    @property
    def cache_dtype(self) -> str:
        """--kv-cache-dtype, or the profile's when it was not given."""
        return self.kv_cache_dtype or self.profile.kv_cache_dtype

    @property
    def kv_cache_tokens(self) -> int:
        """The KV cache's capacity in tokens at this cache dtype ("GPU KV cache size")."""
        return kv_cache_tokens(self.profile, self.cache_dtype)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one GPU holds per token: what it pulls per token of a remote prefill."""
        return self.profile.kv_cache_gib * 2**30 / self.kv_cache_tokens

    @property
    def world_size(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def multi_node(self) -> bool:
        return self.distributed_backend == "ray" or self.nnodes > 1

    @property
    def splits_reasoning(self) -> bool:
        """Reasoning goes to its own field (a parser that separates it is configured)."""
        return (
            self.reasoning_parser is not None
            and self.reasoning_parser not in CONTENT_REASONING_PARSERS
        )

    @property
    def tensor_parallel(self) -> int:
        for name, value in self.ignored:
            if name in ("tensor-parallel-size", "tp") and value and value.isdigit():
                return max(1, int(value))
        return self.profile.tensor_parallel

    def marker(self) -> str:
        """`profile=<name>; time-scale=<x>`: the x-orch-simulator header value."""
        return f"profile={self.profile.name}; time-scale={self.time_scale!r}"


def _whole(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number of at least {minimum}, got {value}")
    return value


def _positive_int(text: str) -> int:
    return _whole(text, 1)


def _count(text: str) -> int:
    return _whole(text, 0)


def _port(text: str) -> int:
    value = _count(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port between 1 and 65535, got {value}")
    return value


def _scale(text: str) -> float:
    return positive(text, "a number", "0.01")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds such as 30, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds of at least 0, got {text!r}")
    return value


def parse_model_len(text: str) -> int | None:
    """vLLM's --max-model-len: '32768', '32k', '1M', '-1' or 'auto' (None = the default)."""
    value = text.strip().lower()
    if value in ("-1", "auto"):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([km]?)", value)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a length such as 32768, 32k or 1M, got {text!r}")
    number = float(match.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[match.group(2)]
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a length of at least 1, got {text!r}")
    return int(number)


def _version(text: str) -> str:
    try:
        parse_version(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orch sim serve",
        description=(
            "A vLLM-compatible simulator: vLLM's endpoints, wire format, start-up log and "
            "metrics, driven by a continuous-batching model. Any other `vllm serve` flag is "
            "accepted and ignored."
        ),
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("model_tag", nargs="?", help="model id or path (as for `vllm serve`)")
    add("--model", help="model id or path (alternative to the positional argument)")
    add("--host", default=None, help="address to listen on (default: all interfaces)")
    add("--port", type=_port, default=8000, help="port (default: 8000)")
    add("--served-model-name", nargs="+", default=None, help="name(s) clients use")
    add("--profile", default=DEFAULT_PROFILE, choices=sorted(PROFILES), help="throughput profile")
    add("--max-num-seqs", type=_positive_int, default=None, help="running-batch limit")
    add("--max-model-len", type=parse_model_len, default=None, help="context length")
    add("--max-num-batched-tokens", type=_positive_int, default=None, help="prefill budget")
    add("--kv-cache-dtype", choices=sorted(KV_DTYPE_BYTES), default=None,
        help="KV cache dtype: auto is the model's bf16 (2 bytes), fp8 one byte, so twice the "
             "tokens (default: the profile's)")  # fmt: skip
    add("--reasoning-parser", default=None, help="reasoning parser (e.g. kimi_k2)")
    add("--api-key", default=None, help="required Bearer key on /v1 (or VLLM_API_KEY)")
    add("--vllm-version", type=_version, default=DEFAULT_VLLM_VERSION, help="wire format version")
    add("--time-scale", type=_scale, default=1.0, help="multiplies every model duration")
    add("--startup-time-scale", type=_scale, default=None, metavar="X",
        help="multiplies the start-up phases instead of --time-scale (short tests)")  # fmt: skip
    add("--fail-at-startup", choices=FAILURES, default=None, help="inject a start-up failure")
    add("--crash-after-requests", type=_count, default=None, metavar="N",
        help="the engine dies during the first request after N have finished")  # fmt: skip
    add("--hang-after-requests", type=_count, default=None, metavar="N",
        help="the engine stops during the first request after N have finished")  # fmt: skip
    add("--slow-start", type=_seconds, default=0.0, metavar="SECONDS",
        help="extra wall-clock seconds of weight loading (not scaled)")  # fmt: skip
    add("--enable-force-include-usage", action="store_true", help="always send a usage chunk")
    add("--default-chat-template-kwargs", type=json_object, default=None,
        help="JSON defaults for chat_template_kwargs, e.g. '{\"thinking\": false}'")  # fmt: skip
    add("--disable-log-stats", action="store_true", help="no periodic stats lines")
    add("--distributed-executor-backend", choices=("mp", "ray", "uni", "external_launcher"),
        default=None, help="ray: join the Ray cluster (RAY_ADDRESS) and place the ranks on it")
    add("--pipeline-parallel-size", "-pp", type=_positive_int, default=1, help="pipeline stages")
    add("--nnodes", "-n", type=_positive_int, default=1, help="nodes of the mp group")
    add("--node-rank", "-r", type=_count, default=0, help="this node's rank in the mp group")
    add("--master-addr", default="127.0.0.1", help="rank 0's address (mp)")
    add("--master-port", type=_port, default=29501, help="rank 0's port (mp)")
    add("--headless", action="store_true", help="a worker node: no API server")
    disagg.add_arguments(parser)
    return parser


def _option_arity(parser: argparse.ArgumentParser) -> dict[str, int | str]:
    arity: dict[str, int | str] = {}
    for action in parser._actions:
        for flag in action.option_strings:
            arity[flag] = "+" if action.nargs == "+" else (0 if action.nargs == 0 else 1)
    return arity


def split_argv(
    argv: list[str], parser: argparse.ArgumentParser
) -> tuple[list[str], list[tuple[str, str | None]]]:
    """(arguments for the parser, ignored vLLM flags as (name, value))."""
    arity = _option_arity(parser)
    known: list[str] = []
    ignored: list[tuple[str, str | None]] = []
    i = 0

    def is_value(token: str) -> bool:
        return not token.startswith("-") or bool(_NUMBER.match(token))

    while i < len(argv):
        token = argv[i]
        if token == "--":
            known.extend(argv[i:])
            break
        if not token.startswith("-") or _NUMBER.match(token):
            known.append(token)
            i += 1
            continue
        name, eq, inline = token.partition("=")
        if name in arity:
            known.append(token)
            i += 1
            count = arity[name]
            if eq or count == 0:
                continue
            if count == "+":
                while i < len(argv) and is_value(argv[i]):
                    known.append(argv[i])
                    i += 1
            elif i < len(argv):
                known.append(argv[i])
                i += 1
            continue
        flag = name.lstrip("-")
        if eq:
            ignored.append((flag, inline))
        elif flag in _BARE_FLAGS or flag.startswith(_BARE_PREFIXES) or flag.startswith("O"):
            ignored.append((flag, None))
        elif i + 1 < len(argv) and is_value(argv[i + 1]):
            ignored.append((flag, argv[i + 1]))
            i += 1
        else:
            ignored.append((flag, None))
        i += 1
    return known, ignored


def _display(value: str | None) -> Any:
    if value is None:
        return True
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def parse_serve_args(argv: list[str]) -> SimOptions:
    """Parse `orch sim serve` arguments; exits with a usage message on bad input (code 2)."""
    parser = build_parser()
    known, ignored = split_argv(argv, parser)
    args = parser.parse_args(known)
    model = _check(parser, args)
    try:
        deployed = deploy(get_profile(args.profile), _deployment_flags(args, ignored))
    except ValueError as error:
        parser.error(str(error))
    profile = deployed.profile
    return SimOptions(
        model=model,
        served_names=list(args.served_model_name or [model]),
        host=args.host if args.host is not None else "0.0.0.0",
        port=args.port,
        profile=profile,
        max_num_seqs=args.max_num_seqs or profile.max_num_seqs,
        max_model_len=args.max_model_len or profile.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens or 8192,
        reasoning_parser=args.reasoning_parser,
        api_key=args.api_key or os.environ.get("VLLM_API_KEY") or None,
        version=VllmVersion(args.vllm_version),
        time_scale=args.time_scale,
        startup_time_scale=args.startup_time_scale or args.time_scale,
        fail_at_startup=args.fail_at_startup or deployed.failure,
        crash_after_requests=args.crash_after_requests,
        hang_after_requests=args.hang_after_requests,
        slow_start=args.slow_start,
        force_include_usage=args.enable_force_include_usage,
        default_template_kwargs=args.default_chat_template_kwargs or {},
        log_stats=not args.disable_log_stats,
        ignored=ignored,
        non_default=_non_default(parser, args, model, ignored),
        distributed_backend=args.distributed_executor_backend,
        pipeline_parallel=args.pipeline_parallel_size,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        headless=args.headless,
        kv_cache_dtype=args.kv_cache_dtype or "",
        data_parallel=deployed.replicas,
        memory_note=_memory_note(deployed),
        deployment_modelled=deployed.deployment is not None,
        kv_transfer=disagg.from_args(args, os.environ),
    )


def _deployment_flags(args: argparse.Namespace,
                      ignored: list[tuple[str, str | None]]) -> dict[str, object]:
    """The flags the what-if model reads: the modelled vLLM ones and the simulator's own."""
    flags: dict[str, object] = {name: value for name, value in ignored if name in MODELLED_FLAGS}
    own = {"max-num-seqs": args.max_num_seqs, "max-num-batched-tokens": args.max_num_batched_tokens,
           "kv-cache-dtype": args.kv_cache_dtype, "max-model-len": args.max_model_len,
           "pipeline-parallel-size": args.pipeline_parallel_size}
    flags.update({name: value for name, value in own.items() if value is not None})
    return flags


def _memory_note(deployed: Deployed) -> str:
    return deployed.engine.why_not if deployed.failure and deployed.engine else ""


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The model served, once the arguments agree with each other (else a usage error)."""
    model: str | None = args.model or args.model_tag
    if not model:
        parser.error("a model is required: orch sim serve MODEL [options]")
    if args.model and args.model_tag and args.model != args.model_tag:
        parser.error(f"two models given: {args.model_tag!r} and --model {args.model!r}")
    parser_name = args.reasoning_parser
    if parser_name is not None and parser_name not in REASONING_PARSERS:
        choices = ",".join(REASONING_PARSERS)
        parser.error(f"invalid reasoning parser: {parser_name} (chose from {{ {choices} }})")
    if args.nnodes > 1 and args.distributed_executor_backend not in (None, "mp", "uni",
                                                                         "external_launcher"):
        parser.error("nnodes > 1 can only be set when distributed executor backend is mp, "
                     "uni or external_launcher.")
    if args.node_rank >= args.nnodes:
        parser.error(f"--node-rank {args.node_rank} is not below --nnodes {args.nnodes}")
    return model


def _non_default(parser: argparse.ArgumentParser, args: argparse.Namespace, model: str,
                 ignored: list[tuple[str, str | None]]) -> dict[str, Any]:
    """vLLM's `non-default args:` line: what differs from the defaults, the key masked."""
    non_default: dict[str, Any] = {"model_tag": model}
    for action in parser._actions:
        dest = action.dest
        if dest in ("help", "model_tag", "model"):
            continue
        value = getattr(args, dest, None)
        if value is not None and value != action.default:
            non_default[dest] = "***" if dest == "api_key" else value
    for name, value in ignored:
        non_default[name.replace("-", "_")] = _display(value)
    return non_default
