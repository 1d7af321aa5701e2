"""A benchmark sweep end to end: probe the server, run the levels (a list, rates, or the
`auto` knee search), write every level as it finishes, and return the sweep's result.

Public API: `run_sweep(config, base_url=..., model=..., api_key=..., out_dir=...,
emit=..., host=..., labels=..., samplers=...) -> SweepResult`. The sweep prints nothing: each
level's start, progress and end are events (events.py) for `emit`, which the caller renders
(and an apply keeps in events.jsonl); the caller prints the result's table. Ctrl-C (SIGINT) or the server going away ends
the sweep early: finished levels stay as written, the level in progress is written with
`"partial": true`, and `SweepResult.stopped` says why. Nothing is raised for that; a
`BenchError` means the benchmark could not run at all (server unreachable, bad input).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from rich.console import RenderableType

from orchestrator.bench import auto as auto_search
from orchestrator.bench.anomalies import flags_against
from orchestrator.bench.arrivals import requests_for_rate
from orchestrator.bench.client import StreamClient
from orchestrator.bench.client_processes import Target
from orchestrator.bench.fleet_level import routed, with_fleet
from orchestrator.bench.http_stream import parse_target
from orchestrator.bench.judge import Judge
from orchestrator.bench.level import WARMUP_TOKENS, Context, LevelRun, LevelSpec, run_level
from orchestrator.bench.load import Stop, stop_unless
from orchestrator.bench.results import csv_columns, csv_row, render_csv
from orchestrator.bench.samplers import Sampler, check_blocks
from orchestrator.bench.server_info import ServerInfo, probe_server
from orchestrator.bench.server_metrics import Scraper, scrape_floor
from orchestrator.bench.stamping import run_on_stamping_loop
from orchestrator.bench.table import render_table
from orchestrator.bench.tokens import TokenCounter, load_tokenizer
from orchestrator.bench.workload import Workload
from orchestrator.errors import RunFolderError
from orchestrator.events import Emit, LevelEnd, LevelStart
from orchestrator.masking import mask
from orchestrator.plan.models import Bench
from orchestrator.runs.layout import BenchLayout
from orchestrator.runs.reader import read_record
from orchestrator.runs.run_records import LevelResult, SweepSummary
from orchestrator.runs.writer import write_level, write_sweep
from orchestrator.tables import to_rich

ExplainDeath = Callable[[str | None], dict[str, Any]]


@dataclass
class SweepResult:
    """The levels in the order they ran, the knee (auto), and why it stopped early, if so."""

    levels: list[LevelRun]
    out_dir: Path
    server: ServerInfo
    knee: int | None = None
    knee_reason: str | None = None
    stopped: str | None = None  # "interrupted", "server_gone", "server_unhealthy", "lock_lost",
    # "client_failed"
    signum: int | None = None  # the signal that interrupted it
    stop_detail: str | None = None  # what failed, when `stopped` is "client_failed"
    crash: dict[str, Any] | None = None  # the server's death during it: level, cause, relaunched
    kept: set[str] = field(default_factory=set)  # levels an earlier part ran: files left as they are
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        return self.stopped == "interrupted"

    @property
    def server_died(self) -> bool:
        return self.stopped in ("server_gone", "server_unhealthy")

    def verdict(self, max_fraction: float) -> str | None:
        """Why the sweep failed (None: it did not), for `orch bench` and an apply alike; an
        interrupt is not a verdict (the caller stops on its signal)."""
        if self.stopped == "server_gone":
            return "the server stopped answering (connections refused); the sweep ended early"
        if self.stopped == "server_unhealthy":
            return "the server reports its engine dead (/health 503); the sweep ended early"
        if self.stopped == "client_failed":
            return f"a client process failed ({self.stop_detail}); the sweep ended early"
        failures = self.failures(max_fraction)
        return "; ".join(failures) if failures else None

    def failures(self, max_fraction: float) -> list[str]:
        """Levels that fail the benchmark: none of their requests succeeded, or more than
        `max_fraction` of them failed; each with what the server said most often."""
        out = []
        for level in self.ordered():
            completed, failed = level.completed, level.failed
            total = completed + failed
            if not failed:
                continue
            top = (level.error_messages or [{}])[0].get("message") or "no message"
            where = f"level {level.level}"
            if not completed:
                out.append(f"{where}: no request succeeded ({failed} failed; the server said: {top})")
            elif failed / total > max_fraction:
                out.append(f"{where}: {failed} of {total} requests failed ({failed / total:.0%}, "
                           f"more than --max-failed-fraction {max_fraction:g}; the server said: {top})")
        return out

    @property
    def results(self) -> list[LevelResult]:
        return [level.result for level in self.levels]

    def ordered(self) -> list[LevelResult]:
        """Level results by mode, then load (auto narrowing runs levels out of order)."""
        def key(result: LevelResult) -> tuple[int, float]:
            if result.mode == "rate":
                return (1, float(result.request_rate or 0))
            return (0, float(result.max_concurrency or 0))

        return sorted(self.results, key=key)

    def render(self, title: str | None = None, width: int | None = None) -> RenderableType:
        """The sweep's table, fitted to `width` (a terminal's; None: as wide as it needs)."""
        scale = self.server.time_scale if self.server.simulated else None
        name = title or f"Benchmark: {self.server.model}"
        if self.knee is not None:
            name += f" (knee at concurrency {self.knee})"
        return to_rich(render_table(self.ordered(), knee=self.knee, time_scale=scale, title=name),
                       width)


def plan_levels(config: Bench) -> list[LevelSpec]:
    """The fixed levels of a sweep (auto levels are decided as it goes). Rates replace the
    default concurrency list; both run when both are given explicitly."""
    specs: list[LevelSpec] = []
    explicit_concurrency = "concurrency" in config.model_fields_set
    mode: Literal["closed", "batch"] = "batch" if config.mode == "batch" else "closed"
    if isinstance(config.concurrency, list) and (explicit_concurrency or not config.rate):
        for c in config.concurrency:
            specs.append(LevelSpec(mode, concurrency=c, requests=_count(config, c)))
    for rate in config.rate:
        count = None if config.duration else requests_for_rate(config.requests_per_level, rate)
        specs.append(LevelSpec("rate", rate=rate, requests=count))
    return specs


def _count(config: Bench, concurrency: int) -> int | None:
    return None if config.duration else config.requests_for(concurrency)


def run_sweep(
    config: Bench,
    *,
    base_url: str,
    model: str | None,
    api_key: str | None,
    out_dir: Path,
    emit: Emit | None = None,
    host: str = "",
    labels: dict[str, str] | None = None,
    base_dir: Path | None = None,
    samplers: Sequence[Sampler] = (),
    finished: Sequence[LevelRun] = (),
    crash: dict[str, Any] | None = None,
    explain_death: ExplainDeath | None = None,
    judge: Judge | None = None,
    holds: Callable[[], bool] | None = None,
    router_metrics: str | None = None,
    router_policy: str | None = None,
) -> SweepResult:
    """Run the whole sweep (blocking) and write its files into `out_dir`. Its level events
    go to `emit` (as `host`'s); `samplers` sample beside the server's /metrics scraper,
    which every sweep has. `finished`: levels an earlier part of the same sweep ran (before
    the server crashed and was relaunched): kept as they are, not run again. `crash`: what
    ended the server in an earlier part. `explain_death(level)`: asked when the server dies
    during this part (the level it cut, or None); it returns summary.json's `crash`. `judge`:
    what held each level and where the sweep plateaus. `holds()`: whether an apply's host
    locks are still its own, every second; once not, it stops (`stopped: "lock_lost"`).
    `router_metrics`, `router_policy`: a vllm-router's fleet (bench/fleet_level.py)."""
    target = parse_target(base_url)
    # local input first: a wrong path is said at once, whatever the server's state
    tokens = load_tokenizer(config.tokenizer, base_dir=base_dir) if config.tokenizer else None
    server = probe_server(target.root, model=model, api_key=api_key,  # before writing anything
                          timeout=config.request_timeout)
    workload = Workload(config, server.model, base_dir=base_dir, tokens=tokens)
    server, samplers = with_fleet(target.root, server, samplers, config, api_key=api_key,
                                  router_metrics=router_metrics, router_policy=router_policy)
    warm = None
    if config.warmup and config.max_tokens > WARMUP_TOKENS:
        short = config.model_copy(update={"max_tokens": WARMUP_TOKENS})
        warm = Workload(short, server.model, base_dir=base_dir, tokens=tokens)
    processes = Target(target.root, server.model, api_key, base_dir, keep_text=tokens is not None)
    coroutine = _sweep(config, target.root, server, workload, api_key, out_dir, emit, host,
                       labels or {}, tokens, warm, list(samplers), list(finished), crash,
                       explain_death, judge, holds, processes)
    return run_on_stamping_loop(coroutine)



async def _sweep(
    config: Bench,
    root: str,
    server: ServerInfo,
    workload: Workload,
    api_key: str | None,
    out_dir: Path,
    emit: Emit | None,
    host: str,
    labels: dict[str, str],
    tokens: TokenCounter | None,
    warm_workload: Workload | None = None,
    extra_samplers: Sequence[Sampler] = (),
    finished: Sequence[LevelRun] = (),
    crash: dict[str, Any] | None = None,
    explain_death: ExplainDeath | None = None,
    judge: Judge | None = None,
    holds: Callable[[], bool] | None = None,
    processes: Target | None = None,
) -> SweepResult:
    ctx = _context(config, root, server, workload, api_key, emit, host, labels, tokens,
                   warm_workload, extra_samplers)
    ctx.judge, ctx.target = judge, processes
    sweep = SweepResult(levels=list(finished), out_dir=out_dir, server=server, crash=crash,
                        kept={level.spec.label for level in finished})
    started = datetime.now(UTC)
    restore = _catch_sigint(ctx.stop)
    watching = asyncio.ensure_future(stop_unless(ctx.stop, holds)) if holds else None
    try:
        if config.concurrency == "auto":
            await _auto(ctx, sweep)
        for spec in plan_levels(config):
            if ctx.stop.is_set:
                break
            if spec.label not in sweep.kept:
                await _run_and_write(ctx, sweep, spec)
    finally:
        restore()
        if watching is not None:
            watching.cancel()
        ctx.client.close()
        sweep.stopped = ctx.stop.reason
        sweep.signum = ctx.stop.signum
        sweep.stop_detail = ctx.stop.detail
        if sweep.server_died and explain_death is not None:
            cut = sweep.levels[-1] if sweep.levels and sweep.levels[-1].partial else None
            sweep.crash = explain_death(cut.spec.label if cut else None)
        _finish(sweep, config, root, labels, started, judge)
    return sweep


def _context(
    config: Bench,
    root: str,
    server: ServerInfo,
    workload: Workload,
    api_key: str | None,
    emit: Emit | None,
    host: str,
    labels: dict[str, str],
    tokens: TokenCounter | None,
    warm_workload: Workload | None,
    extra_samplers: Sequence[Sampler],
) -> Context:
    """What every level of the sweep shares: one client, the /metrics scraper first."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = StreamClient(
        parse_target(root),
        workload.path,
        headers=headers,
        completions=workload.completions,
        timeout=config.request_timeout,
        keep_text=tokens is not None,
    )
    ctx = Context(
        config=config,
        client=client,
        workload=workload,
        server=server,
        samplers=[Scraper(f"{root}/metrics", None if routed(extra_samplers) else config.metrics_interval,
                          headers, floor_s=scrape_floor(server.simulated, server.time_scale)),
                  *extra_samplers],
        stop=Stop(),
        emit=emit,
        host=host,
        labels=labels,
        tokens=tokens,
        warm_workload=warm_workload,
    )
    check_blocks(ctx.samplers)
    return ctx


def kept_levels(config: Bench, out_dir: Path) -> tuple[list[LevelRun], list[str]]:
    """What an interrupted sweep in `out_dir` left: its finished levels of this plan (to keep,
    as written) and the labels of those it left partial (to run again)."""
    bench = BenchLayout(out_dir)
    finished: list[LevelRun] = []
    partial: list[str] = []
    if config.concurrency == "auto":  # a search starts over: it decides from every level
        return finished, partial
    for spec in plan_levels(config):
        path = bench.level(spec.label)
        try:
            result = read_record(path, LevelResult)
        except RunFolderError:
            continue
        if "partial" in result.model_fields_set and not result.partial:
            finished.append(LevelRun(spec, result))
        else:
            partial.append(spec.label)
    return finished, partial


async def _run_and_write(ctx: Context, sweep: SweepResult, spec: LevelSpec) -> LevelRun:
    if ctx.emit is not None:
        ctx.emit(LevelStart(ctx.host, label=spec.label, mode=spec.mode,
                            concurrency=spec.concurrency, rate=spec.rate,
                            requests=spec.requests))
    level = await run_level(ctx, spec)
    level.result.flags = [*_cross_level_flags(sweep.levels, level), *level.result.flags]
    if ctx.judge is not None:  # after the flags: a capped level's verdict reads them
        level.result.limiter = ctx.judge.level(level.result, [lv.result for lv in sweep.levels])
    sweep.levels.append(level)
    write_level(BenchLayout(sweep.out_dir), level.result, level.rows)  # once: its flags are final
    if ctx.emit is not None:
        ctx.emit(level_end(ctx.host, level))
    return level


def _load(level: LevelRun) -> tuple[float, float]:
    spec = level.spec
    return (float((spec.rate if spec.mode == "rate" else spec.concurrency) or 0),
            level.result.output_throughput or 0.0)


def _cross_level_flags(earlier: Sequence[LevelRun], level: LevelRun) -> list[str]:
    """throughput_drop and no_scaling of a level with finished requests, against the
    levels of its mode that finished some before it (kept ones included)."""
    if not level.result.completed:
        return []
    mode = level.spec.mode
    return flags_against([_load(lv) for lv in earlier if lv.spec.mode == mode and lv.result.completed],
                         _load(level))


def level_end(host: str, level: LevelRun) -> LevelEnd:
    """The level's end as an event, with the figures of the sweep's table: model time for a
    simulator run; none when no request finished (it has none)."""
    r = level.result
    spec = level.spec
    return LevelEnd(
        host, label=spec.label, mode=spec.mode, concurrency=spec.concurrency, rate=spec.rate,
        completed=r.completed, failed=r.failed, partial=level.partial,
        output_throughput=r.figure("output_throughput") if r.completed else None,
        mean_e2el_ms=r.figure("mean_e2el_ms") if r.completed else None,
        model_time=bool(r.normalized),
        limiter=(r.limiter or {}).get("name"),
    )


async def _auto(ctx: Context, sweep: SweepResult) -> None:
    config = ctx.config
    observed: dict[int, auto_search.Observation] = {}
    mode: Literal["closed", "batch"] = "batch" if config.mode == "batch" else "closed"
    for _ in range(64):  # bounded: doubling plus bisection needs far fewer
        decision = auto_search.decide(observed, config.auto)
        if decision.next_level is None:
            sweep.knee, sweep.knee_reason = decision.knee, decision.reason
            return
        c = decision.next_level
        level = await _run_and_write(ctx, sweep, LevelSpec(mode, concurrency=c, requests=_count(config, c)))
        if ctx.stop.is_set:
            return
        r = level.result
        total = r.completed + r.failed
        attainment = r.figure("slo_attainment")
        observed[c] = auto_search.Observation(
            throughput=r.output_throughput or 0.0,
            slo_ok=attainment is None or attainment >= config.slo.attainment,
            usable=total > 0 and r.failed <= total / 2,
        )


def _finish(sweep: SweepResult, config: Bench, root: str, labels: dict[str, str], started: datetime,
            judge: Judge | None = None) -> None:
    """The CSV and summary.json (each level's file was written as it ended)."""
    ordered = sweep.ordered()
    bench = BenchLayout(sweep.out_dir)
    columns = csv_columns(config.percentiles, config.percentile_metrics)
    summary = SweepSummary.model_validate({
        "base_url": mask(root),
        "model": sweep.server.model,
        "server_version": sweep.server.version,
        "simulated": sweep.server.simulated,
        "simulator_profile": sweep.server.profile,
        "time_scale": sweep.server.time_scale,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "stopped": sweep.stopped,
        "crash": sweep.crash,
        "knee": sweep.knee,
        "knee_reason": sweep.knee_reason,
        **({"plateau": judge.sweep(ordered, sweep.knee)} if judge is not None and ordered else {}),
        "labels": labels,
        "config": config.model_dump(mode="json"),
        "levels": [csv_row(r, columns) for r in ordered],
        "anomalies": {r.level: r.flags for r in ordered if r.flags},
        "files": {r.level: bench.level(r.level).name for r in ordered},
    })
    sweep.summary = summary.model_dump(mode="json")
    write_sweep(bench, render_csv(ordered, columns), summary)


def _catch_sigint(stop: Stop) -> Any:
    """The first Ctrl-C, SIGTERM or SIGHUP ends the sweep gracefully (the level running is
    kept, marked partial); a second one interrupts for good. Taken through the loop, not
    raised by the process-wide handler: a KeyboardInterrupt raised while a finished task
    leaves asyncio's WeakSet is printed as "Exception ignored" and lost."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def restore() -> None:
        for sig, handler in previous.items():
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
            signal.signal(sig, handler)

    def on_signal(signum: int) -> None:
        stop.signum = signum
        stop.set("interrupted")
        restore()

    try:
        for sig in previous:
            loop.add_signal_handler(sig, on_signal, sig)
    except (NotImplementedError, RuntimeError):
        return lambda: None
    return restore
