"""One level of a sweep: warm-up, then each repeat (GC frozen, the samplers running), and
the level's result: the vllm-compatible figures pooled over repeats, plus ours."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from orchestrator.bench.anomalies import effective_concurrency, level_flags
from orchestrator.bench.client import StreamClient
from orchestrator.bench.client_processes import ClientGroup, ClientProcessError, Target, jobs_for
from orchestrator.bench.client_shares import busiest_cpu, latest_process, processes_block, shares
from orchestrator.bench.judge import Judge
from orchestrator.bench.lateness import lateness
from orchestrator.bench.level_metrics import summarize_level
from orchestrator.bench.load import RequestRun, Shape, Stop, run_requests
from orchestrator.bench.progress import progress_events
from orchestrator.bench.request_record import (
    METRIC_DEFINITIONS,
    RequestMetrics,
    derive,
    jsonl_row,
    token_times_ns,
)
from orchestrator.bench.results import normalized
from orchestrator.bench.samplers import Sampler, Snapshot
from orchestrator.bench.server_info import ServerInfo
from orchestrator.bench.stats import relative_spread, summarize
from orchestrator.bench.tokens import TokenCounter
from orchestrator.bench.workload import Workload
from orchestrator.events import Emit
from orchestrator.plan.models import Bench
from orchestrator.runs.run_records import LevelResult, RepeatResult


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
    judge: Judge | None = None  # what held each level (bench/judge.py); None: not judged
    target: Target | None = None  # where client processes send (client_processes > 1)


@dataclass(frozen=True)
class Repeat:
    """One measured repeat of a level: its requests and what each sampler saw meanwhile."""

    run: RequestRun
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
        run = await run_requests(ctx.client, ctx.warm_workload or ctx.workload, warm, ctx.stop,
                                id_prefix=f"{label}-w", warmup=True)
        warmup_records = run.records
        if ctx.tokens is not None:
            ctx.tokens.fill(warmup_records, ctx.workload.prompt_texts)
    repeats: list[Repeat] = []
    for repeat in range(config.repeats):
        if ctx.stop.is_set:
            break
        one = await _repeat(ctx, spec, f"{label}-{repeat}")
        if one is None:
            break
        repeats.append(one)
    return compose(ctx, spec, repeats, warmup_records)


async def _repeat(ctx: Context, spec: LevelSpec, phase: str) -> Repeat | None:
    """One measured repeat. With client processes, they are spawned and ready before its
    clock starts (None: they could not start; `ctx.stop` says why)."""
    shape = _shape(spec, ctx.config, spec.requests)
    group = None
    if ctx.config.client_processes > 1 and ctx.target is not None:
        group = ClientGroup(jobs_for(ctx.config, ctx.target, shape, phase))
    try:
        if group is not None:
            try:
                if not await group.start(ctx.stop):
                    return None  # stopped while they started: nothing was measured
            except ClientProcessError as error:
                ctx.stop.set("client_failed", str(error))
                return None
        run = await _measured(ctx, spec, shape, phase, group)
    finally:
        if group is not None:
            group.close()
    if ctx.tokens is not None:  # after the run: never on the timing path
        ctx.tokens.fill(run.records, ctx.workload.prompt_texts)
    return Repeat(run, {s.block: s.snapshots() for s in ctx.samplers})


async def _measured(ctx: Context, spec: LevelSpec, shape: Shape, phase: str,
                    group: ClientGroup | None) -> RequestRun:
    """The repeat's requests, the samplers running and the GC frozen meanwhile."""
    origin_ns = time.perf_counter_ns()
    for sampler in ctx.samplers:
        sampler.start(origin_ns)
    run = RequestRun()
    gc.collect()
    gc.freeze()  # nothing allocated before the level is ever scanned during it
    if group is not None:  # its records arrive at the end: its progress is the tallies
        run.origin_ns = origin_ns
    try:
        async with progress_events(ctx.emit, ctx.host, spec.label, run, spec.requests,
                                   group.tally if group is not None else None):
            if group is None:
                await run_requests(ctx.client, ctx.workload, shape, ctx.stop, id_prefix=phase,
                                   run=run)
            else:
                run = await group.run(ctx.stop)
                ctx.client.keep_alive = ctx.client.keep_alive and group.keep_alive
    finally:
        gc.unfreeze()
        for sampler in ctx.samplers:
            sampler.stop()
    return run


@dataclass(frozen=True)
class MeasuredRepeat:
    """One repeat as the level's result takes it: its requests' metrics and JSONL rows, its
    entry of `repeats`, and each sampler's summary of it (by block)."""

    repeat: Repeat
    metrics: list[RequestMetrics]
    rows: list[dict[str, Any]]
    result: RepeatResult
    sampled: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Pooled:
    """The measured repeats taken together: what the level's own figures come from."""

    metrics: list[RequestMetrics]
    duration_s: float
    cpu_s: float
    lags_s: list[float]  # how late each scheduled (open-loop) request started
    loop_lags_s: list[float]  # how late the client's event loop woke (load.py `_loop_lag`)
    stopped: str | None

    @classmethod
    def of(cls, measured: Sequence[MeasuredRepeat]) -> Pooled:
        metrics = [m for one in measured for m in one.metrics]
        stopped = None
        for one in measured:
            stopped = stopped or one.repeat.run.stopped
        return cls(metrics=metrics,
                   duration_s=sum(one.repeat.run.duration_s for one in measured),
                   cpu_s=sum(one.repeat.run.cpu_s for one in measured),
                   lags_s=[m.start_s - m.scheduled_s for m in metrics if m.scheduled_s is not None],
                   loop_lags_s=[lag for one in measured for lag in one.repeat.run.loop_lags_s],
                   stopped=stopped)


def compose(ctx: Context, spec: LevelSpec, repeats: list[Repeat],
            warmup_records: list[Any]) -> LevelRun:
    """The level's result from its repeats (pure apart from reading the clock for `date`;
    the samplers are asked only to summarize what they sampled)."""
    label = spec.label
    rows = [jsonl_row(r, derive(r, r.start_ns), label) for r in warmup_records]
    measured = [_measure(ctx, one, label) for one in repeats]
    for one in measured:
        rows.extend(one.rows)
    pooled = Pooled.of(measured)
    stopped = pooled.stopped or ctx.stop.reason
    figures, blocks = _level_figures(ctx, pooled, measured)
    data = _vllm_head(ctx, spec, len(pooled.metrics))
    for key, value in ctx.labels.items():
        data.setdefault(key, value)
    data.update(figures)
    data.update(_orch_keys(ctx, spec, pooled, measured, blocks,
                           partial=stopped is not None or len(repeats) < ctx.config.repeats,
                           stopped=stopped, warmup_requests=len(warmup_records)))
    if ctx.server.simulated and ctx.server.time_scale:
        data["normalized"] = normalized(figures, ctx.server.time_scale)
    data["flags"] = []
    level = LevelResult.model_validate(data)
    level.effective_concurrency = effective_concurrency(level)
    level.flags = level_flags(level)
    return LevelRun(spec, level, rows)


def _summary(ctx: Context, metrics: list[RequestMetrics], duration_s: float,
             token_times_s: Sequence[float] = ()) -> dict[str, Any]:
    """summarize_level with the plan's objectives and percentiles; a simulator's goodput
    is judged in model time."""
    config = ctx.config
    return summarize_level(metrics, duration_s=duration_s, slo=config.slo,
                           token_times_s=token_times_s, percentiles=config.percentiles,
                           percentile_metrics=config.percentile_metrics,
                           time_scale=ctx.server.time_scale if ctx.server.simulated else None)


# The level's figures each `repeats` entry carries (RepeatResult's, in its order)
REPEAT_FIGURES = ("duration", "completed", "failed", "output_throughput", "mean_ttft_ms",
                  "mean_e2el_ms", "max_output_tokens_per_s", "max_concurrent_requests")


def _measure(ctx: Context, measured: Repeat, label: str) -> MeasuredRepeat:
    """One repeat's metrics, rows and `repeats` entry (its figures, then the samplers'
    `repeat_keys`, then `stopped`)."""
    run = measured.run
    metrics = [derive(r, run.origin_ns) for r in run.records]
    rows = [jsonl_row(r, m, label) for r, m in zip(run.records, metrics, strict=True)]
    token_times = [(t - run.origin_ns) / 1e9 for r in run.records if r.ok
                   for t in token_times_ns(r)]
    one = _summary(ctx, metrics, run.duration_s, token_times)
    sampled: dict[str, dict[str, Any]] = {}
    sampler_figures: dict[str, Any] = {}
    for sampler in ctx.samplers:
        seen = sampler.summarize(measured.samples.get(sampler.block, []))
        sampled[sampler.block] = seen
        sampler_figures.update({key: seen.get(key) for key in sampler.repeat_keys})
    result = RepeatResult.model_validate({
        **{key: one[key] for key in REPEAT_FIGURES},
        **sampler_figures,
        "stopped": run.stopped,
    })
    return MeasuredRepeat(measured, metrics, rows, result, sampled)


def _level_figures(ctx: Context, pooled: Pooled, measured: Sequence[MeasuredRepeat],
                   ) -> tuple[dict[str, Any], dict[str, dict[str, Any] | None]]:
    """The level's figures over its pooled requests, with the samplers' level figures, and
    each sampler's block merged from its repeats. The peaks are the busiest repeat's: one
    second bins and overlaps do not add up across repeats."""
    figures = _summary(ctx, pooled.metrics, pooled.duration_s)
    blocks = {s.block: s.merge([one.sampled[s.block] for one in measured]) for s in ctx.samplers}
    for sampler in ctx.samplers:
        figures.update(sampler.level_figures(blocks[sampler.block], figures))
    if measured:
        figures["max_output_tokens_per_s"] = max(
            one.result.max_output_tokens_per_s or 0.0 for one in measured)
        figures["max_concurrent_requests"] = max(
            one.result.max_concurrent_requests or 0 for one in measured)
    return figures, blocks


def _vllm_head(ctx: Context, spec: LevelSpec, num_prompts: int) -> dict[str, Any]:
    """The keys `vllm bench serve --save-result` opens its result with."""
    config = ctx.config
    chat = config.endpoint == "chat"
    rate = spec.mode == "rate"
    return {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai-chat" if chat else "openai",
        "backend": "openai-chat" if chat else "openai",
        "label": ctx.labels.get("label"),
        "model_id": ctx.server.model,
        "tokenizer_id": str(ctx.tokens.source.parent) if ctx.tokens else ctx.server.model,
        "num_prompts": num_prompts,
        "request_rate": spec.rate if rate else "inf",
        "burstiness": config.burstiness if rate else 1.0,
        "max_concurrency": config.max_in_flight if rate else spec.concurrency,
    }


def _orch_keys(ctx: Context, spec: LevelSpec, pooled: Pooled,
               measured: Sequence[MeasuredRepeat], blocks: dict[str, dict[str, Any] | None],
               *, partial: bool, stopped: str | None, warmup_requests: int) -> dict[str, Any]:
    """orch's keys after the figures: the level, how it ran, its repeats, the client's own
    load, the samplers' blocks and the server."""
    config, server = ctx.config, ctx.server
    repeats = [one.result for one in measured]
    runs = [one.repeat.run for one in measured]
    return {
        "level": spec.label,
        "mode": spec.mode,
        "prompt_prefix": config.prompt_prefix,
        # asked (synthetic prompts, their unique prefix included); mean_input_tokens is
        # what the server counted, the chat template's tokens included
        "input_len": config.input_len,
        "partial": partial,
        "stopped": stopped,
        "warmup_requests": warmup_requests,
        # False once the server closed kept connections: each request then had its own
        "keep_alive": ctx.client.keep_alive,
        "repeats": repeats,
        "spread": relative_spread([r.output_throughput or 0.0 for r in repeats]),
        **_client_keys(ctx, spec, pooled, runs),
        **blocks,
        "server_version": server.version,
        "simulated": server.simulated,
        "simulator_profile": server.profile,
        "time_scale": server.time_scale,
        "metric_definitions": METRIC_DEFINITIONS,
    }


def _client_keys(ctx: Context, spec: LevelSpec, pooled: Pooled,
                 runs: Sequence[RequestRun]) -> dict[str, Any]:
    """The client's own load: its CPU, how late it sent and woke. With client processes,
    the busiest one's core and the latest one's loop (one process starved or busy is
    enough to hold the level), and each one's figures."""
    keys: dict[str, Any] = {
        "client_cpu_s": pooled.cpu_s,
        "client_cpu_utilization": pooled.cpu_s / pooled.duration_s if pooled.duration_s > 0 else 0.0,
        "client_schedule_lag_ms": (summarize([x * 1000 for x in pooled.lags_s])
                                   if pooled.lags_s else None),
    }
    if pooled.loop_lags_s:  # only where the loop was watched (not a level of records alone)
        keys["client_loop_lag_ms"] = summarize([x * 1000 for x in pooled.loop_lags_s])
        keys["client_late"] = lateness(pooled.loop_lags_s, pooled.duration_s)
    busiest = busiest_cpu(runs)
    if busiest is None:
        return keys
    block = processes_block(runs, shares(_shape(spec, ctx.config, spec.requests),
                                         ctx.config.client_processes))
    keys["client_cpu_utilization"] = busiest
    latest = latest_process(block)
    if latest is not None:
        keys["client_loop_lag_ms"], keys["client_late"] = latest["loop_lag_ms"], latest["late"]
    keys["client_processes"] = block
    return keys
