"""One level of a sweep: warm-up, then each repeat (GC frozen, the samplers running), and
the level's result: the vllm-compatible figures pooled over repeats, plus ours."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from orchestrator.bench.anomalies import effective_concurrency, level_flags
from orchestrator.bench.client import StreamClient
from orchestrator.bench.level_metrics import summarize_level
from orchestrator.bench.load import Phase, Shape, Stop, run_phase
from orchestrator.bench.progress import progress_events
from orchestrator.bench.record import (
    METRIC_DEFINITIONS,
    RequestMetrics,
    derive,
    jsonl_row,
    token_times_ns,
)
from orchestrator.bench.results import normalized
from orchestrator.bench.samplers import Sampler, Snapshot
from orchestrator.bench.stats import relative_spread, summarize
from orchestrator.bench.target import ServerInfo
from orchestrator.bench.tokens import TokenCounter
from orchestrator.bench.workload import Workload
from orchestrator.events import Emit
from orchestrator.plan.models import Bench
from orchestrator.runs.records import LevelResult


@dataclass(frozen=True)
class LevelSpec:
    mode: Literal["closed", "batch", "rate"]
    concurrency: int | None = None
    rate: float | None = None
    requests: int | None = None  # None: run for the configured duration

    @property
    def label(self) -> str:
        if self.mode == "rate":
            return f"r{self.rate:g}"
        return f"c{self.concurrency}"


@dataclass
class LevelRun:
    """What one level produced: its result (the level JSON) and its JSONL rows."""

    spec: LevelSpec
    result: LevelResult
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return self.result.partial


@dataclass
class Context:
    """What every level of a sweep shares."""

    config: Bench
    client: StreamClient
    workload: Workload
    server: ServerInfo
    samplers: list[Sampler]  # each fills its block of the level JSON (server_metrics, ...)
    stop: Stop
    labels: dict[str, str]
    emit: Emit | None = None  # the observer of the level events (None: nobody watches)
    host: str = ""  # the events' host
    tokens: TokenCounter | None = None  # --tokenizer: counts for servers without usage
    warm_workload: Workload | None = None  # short answers for the warm-up (warm_up_shape)


@dataclass(frozen=True)
class Repeat:
    """One measured repeat of a level: its requests and what each sampler saw meanwhile."""

    phase: Phase
    samples: dict[str, list[Snapshot]] = field(default_factory=dict)  # by sampler block


# Warm-up answers are this short: enough decode steps at the level's batch size, at a
# fraction of a measured request's cost.
WARMUP_TOKENS = 16


def warm_up_shape(spec: LevelSpec, warmup: int) -> Shape:
    """A closed or batch level warms up at its own concurrency (max(warmup, C) short
    requests), so every batch size it will run has been through the engine once: a CPU
    vLLM compiles each new shape, and right after start-up the first level measured that
    (TTFT 503 ms, then 22-27 ms on the same level). A rate level keeps a light warm-up."""
    if spec.mode == "rate" or spec.concurrency is None:
        return Shape(mode="closed", concurrency=1, count=warmup)
    return Shape(mode="closed", concurrency=spec.concurrency,
                 count=max(warmup, spec.concurrency))


def _shape(spec: LevelSpec, config: Bench, count: int | None) -> Shape:
    return Shape(
        mode=spec.mode,
        concurrency=spec.concurrency or 1,
        rate=spec.rate or 0.0,
        count=count,
        duration_s=config.duration if count is None else None,
        arrivals=config.arrivals,
        burstiness=config.burstiness,
        seed=config.seed,
        max_in_flight=config.max_in_flight if spec.mode == "rate" else None,
    )


async def run_level(ctx: Context, spec: LevelSpec) -> LevelRun:
    config = ctx.config
    label = spec.label
    warmup_records = []
    if config.warmup and not ctx.stop.is_set:
        warm = warm_up_shape(spec, config.warmup)
        phase = await run_phase(ctx.client, ctx.warm_workload or ctx.workload, warm, ctx.stop,
                                id_prefix=f"{label}-w", warmup=True)
        warmup_records = phase.records
        if ctx.tokens is not None:
            ctx.tokens.fill(warmup_records, ctx.workload.prompt_texts)
    repeats: list[Repeat] = []
    for repeat in range(config.repeats):
        if ctx.stop.is_set:
            break
        origin_ns = time.perf_counter_ns()
        for sampler in ctx.samplers:
            sampler.start(origin_ns)
        phase = Phase()
        gc.collect()
        gc.freeze()  # nothing allocated before the level is ever scanned during it
        try:
            async with progress_events(ctx.emit, ctx.host, label, phase, spec.requests):
                await run_phase(
                    ctx.client,
                    ctx.workload,
                    _shape(spec, config, spec.requests),
                    ctx.stop,
                    id_prefix=f"{label}-{repeat}",
                    phase=phase,
                )
        finally:
            gc.unfreeze()
            for sampler in ctx.samplers:
                sampler.stop()
        if ctx.tokens is not None:  # after the phase: never on the timing path
            ctx.tokens.fill(phase.records, ctx.workload.prompt_texts)
        repeats.append(Repeat(phase, {s.block: s.snapshots() for s in ctx.samplers}))
    return compose(ctx, spec, repeats, warmup_records)


def compose(ctx: Context, spec: LevelSpec, phases: list[Repeat], warmup_records: list[Any]) -> LevelRun:
    """The level's result from its repeats (pure apart from reading the clock for `date`;
    the samplers are asked only to summarize what they sampled)."""
    config = ctx.config
    label = spec.label
    rows: list[dict[str, Any]] = []
    for record in warmup_records:
        rows.append(jsonl_row(record, derive(record, record.start_ns), label))
    scale = ctx.server.time_scale if ctx.server.simulated else None

    def summary(metrics: list[RequestMetrics], duration_s: float, **extra: Any) -> dict[str, Any]:
        return summarize_level(metrics, duration_s=duration_s, slo=config.slo,
                               percentiles=config.percentiles,
                               percentile_metrics=config.percentile_metrics, time_scale=scale,
                               **extra)

    pooled: list[RequestMetrics] = []
    repeats: list[dict[str, Any]] = []
    sampled: dict[str, list[dict[str, Any]]] = {s.block: [] for s in ctx.samplers}
    total_duration = cpu = 0.0
    lags: list[float] = []
    stopped = None
    for measured in phases:
        phase = measured.phase
        metrics = [derive(r, phase.origin_ns) for r in phase.records]
        rows.extend(jsonl_row(r, m, label) for r, m in zip(phase.records, metrics, strict=True))
        token_times = [(t - phase.origin_ns) / 1e9 for r in phase.records if r.ok
                       for t in token_times_ns(r)]
        one = summary(metrics, phase.duration_s, token_times_s=token_times)
        figures_of: dict[str, Any] = {}
        for sampler in ctx.samplers:
            seen = sampler.summarize(measured.samples.get(sampler.block, []))
            sampled[sampler.block].append(seen)
            figures_of.update({key: seen.get(key) for key in sampler.repeat_keys})
        repeats.append(
            {
                "duration": one["duration"],
                "completed": one["completed"],
                "failed": one["failed"],
                "output_throughput": one["output_throughput"],
                "mean_ttft_ms": one["mean_ttft_ms"],
                "mean_e2el_ms": one["mean_e2el_ms"],
                "max_output_tokens_per_s": one["max_output_tokens_per_s"],
                "max_concurrent_requests": one["max_concurrent_requests"],
                **figures_of,
                "stopped": phase.stopped,
            }
        )
        pooled.extend(metrics)
        total_duration += phase.duration_s
        cpu += phase.cpu_s
        lags.extend(m.start_s - m.scheduled_s for m in metrics if m.scheduled_s is not None)
        stopped = stopped or phase.stopped
    stopped = stopped or ctx.stop.reason
    partial = stopped is not None or len(phases) < config.repeats
    figures = summary(pooled, total_duration)
    blocks = {s.block: s.merge(sampled[s.block]) for s in ctx.samplers}
    for sampler in ctx.samplers:
        figures.update(sampler.level_figures(blocks[sampler.block], figures))
    if repeats:
        figures["max_output_tokens_per_s"] = max(r["max_output_tokens_per_s"] for r in repeats)
        figures["max_concurrent_requests"] = max(r["max_concurrent_requests"] for r in repeats)
    chat = config.endpoint == "chat"
    result: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai-chat" if chat else "openai",
        "backend": "openai-chat" if chat else "openai",
        "label": ctx.labels.get("label"),
        "model_id": ctx.server.model,
        "tokenizer_id": str(ctx.tokens.source.parent) if ctx.tokens else ctx.server.model,
        "num_prompts": len(pooled),
        "request_rate": spec.rate if spec.mode == "rate" else "inf",
        "burstiness": config.burstiness if spec.mode == "rate" else 1.0,
        "max_concurrency": spec.concurrency if spec.mode != "rate" else config.max_in_flight,
    }
    for key, value in ctx.labels.items():
        result.setdefault(key, value)
    result.update(figures)
    result.update(
        {
            "level": label,
            "mode": spec.mode,
            "prompt_prefix": config.prompt_prefix,
            # asked (synthetic prompts, their unique prefix included); mean_input_tokens is
            # what the server counted, the chat template's tokens included
            "input_len": config.input_len,
            "partial": partial,
            "stopped": stopped,
            "warmup_requests": len(warmup_records),
            # False once the server closed kept connections: each request then had its own
            "keep_alive": ctx.client.keep_alive,
            "repeats": repeats,
            "spread": relative_spread([r["output_throughput"] for r in repeats]),
            "client_cpu_s": cpu,
            "client_cpu_utilization": cpu / total_duration if total_duration > 0 else 0.0,
            "client_schedule_lag_ms": summarize([x * 1000 for x in lags]) if lags else None,
            **blocks,
            "server_version": ctx.server.version,
            "simulated": ctx.server.simulated,
            "simulator_profile": ctx.server.profile,
            "time_scale": ctx.server.time_scale,
            "metric_definitions": METRIC_DEFINITIONS,
        }
    )
    if ctx.server.simulated and ctx.server.time_scale:
        result["normalized"] = normalized(figures, ctx.server.time_scale)
    result["flags"] = []
    level = LevelResult.model_validate(result)
    level.effective_concurrency = effective_concurrency(level)
    level.flags = level_flags(level)
    return LevelRun(spec, level, rows)
