"""llama.cpp's server (`llama-server --metrics`): orch benchmarks it by URL (`orch bench`) and
reads its /metrics names (tools/server/server.cpp); it does not launch it."""

from __future__ import annotations

from orchestrator.engines.base import MetricNames

METRICS = MetricNames(
    prefix="llamacpp",
    gauges={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),
    },
    counters={
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
    },
)
