"""A level's load split across client processes, and their runs merged back (pure).

`shares(shape, n)`: the n processes' shapes. A closed or batch level's concurrency C and
request count are split as evenly as possible (each process at least one in flight; the
counts add up exactly). A rate level's schedule is drawn once, as one process would draw
it, and process k sends every n-th arrival from the k-th on (Shape.part): the arrivals of
all processes together are the single-process schedule, the rate of each is the level's
over n. Request i of process k is the level's request i * n + k (`global_index`), so the
prompts cycle as they would in one process.

`merge(parts)`: one `RequestRun` of every process's records, over the span from the first
start to the last end (the records' stamps are perf_counter, CLOCK_MONOTONIC on Linux: one
clock for every process of the host), so the level's figures are computed over all its
requests exactly as over one process's; the parts are kept for `processes_block`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from orchestrator.bench.lateness import lateness
from orchestrator.bench.load import RequestRun, Shape
from orchestrator.bench.request_record import derive
from orchestrator.bench.stats import summarize


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` in `parts` shares that differ by at most one, the larger first."""
    if parts < 1:
        raise ValueError(f"split into at least one part, got {parts}")
    base, extra = divmod(total, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def shares(shape: Shape, processes: int) -> list[Shape]:
    """Each process's shape (see the module docstring)."""
    if processes == 1:
        return [shape]
    if shape.mode == "rate":
        cap = shape.max_in_flight
        if cap is not None and cap < processes:
            raise ValueError(f"{processes} client processes need max_in_flight >= {processes}, "
                             f"got {cap}")
        caps = split_evenly(cap, processes) if cap is not None else [None] * processes
        return [dataclasses.replace(shape, max_in_flight=caps[k], part=(k, processes))
                for k in range(processes)]
    if shape.concurrency < processes:
        raise ValueError(f"{processes} client processes need concurrency >= {processes}, "
                         f"got {shape.concurrency}")
    levels = split_evenly(shape.concurrency, processes)
    counts = (split_evenly(shape.count, processes) if shape.count is not None
              else [None] * processes)
    return [dataclasses.replace(shape, concurrency=levels[k], count=counts[k])
            for k in range(processes)]


def global_index(local: int, process: int, processes: int) -> int:
    """The level's index of request `local` of process `process`."""
    return local * processes + process


def merge(parts: Sequence[RequestRun]) -> RequestRun:
    """One run of the processes' runs: every record (in the level's order), the span from
    the first start to the last end, their CPU seconds together, the first stop reason, and
    the loop lateness of the latest process (`latest`): what the limiter judges."""
    started = [p for p in parts if p.origin_ns]
    records = sorted((r for p in parts for r in p.records), key=lambda r: r.index)
    return RequestRun(
        records=records,
        origin_ns=min((p.origin_ns for p in started), default=0),
        end_ns=max((p.end_ns for p in started), default=0),
        cpu_s=sum(p.cpu_s for p in parts),
        stopped=next((p.stopped for p in parts if p.stopped), None),
        loop_lags_s=list(latest(parts).loop_lags_s) if parts else [],
        parts=list(parts),
    )


def _late_key(run: RequestRun) -> tuple[float, float]:
    lags = sorted(run.loop_lags_s)
    median = lags[len(lags) // 2] if lags else 0.0
    return (float(lateness(lags, run.duration_s)["share"]), median)


def latest(parts: Sequence[RequestRun]) -> RequestRun:
    """The process whose loop lost the largest share of its time to late wake-ups (then:
    the highest median lateness)."""
    return max(parts, key=_late_key)


def by_process(repeats: Sequence[RequestRun]) -> list[list[RequestRun]]:
    """Each process's runs over the level's repeats (repeats that ran in one process: none)."""
    count = max((len(run.parts) for run in repeats), default=0)
    return [[run.parts[k] for run in repeats if len(run.parts) > k] for k in range(count)]


def busiest_cpu(repeats: Sequence[RequestRun]) -> float | None:
    """The largest share of its own core one client process used (None: one process ran)."""
    shares_ = [_cpu(runs) for runs in by_process(repeats)]
    return max(shares_) if shares_ else None


def _cpu(runs: Sequence[RequestRun]) -> float:
    wall = sum(run.duration_s for run in runs)
    return sum(run.cpu_s for run in runs) / wall if wall > 0 else 0.0


def processes_block(repeats: Sequence[RequestRun], shapes: Sequence[Shape]) -> dict[str, Any]:
    """The level's `client_processes`: how many ran, and each one's own figures over the
    level's repeats: its load, requests, throughput, CPU and loop lateness."""
    return {"count": len(shapes),
            "processes": [_one(k, runs, shapes[k]) for k, runs in enumerate(by_process(repeats))]}


def latest_process(block: dict[str, Any]) -> dict[str, Any] | None:
    """The process of a `client_processes` block whose loop lost the largest share of its
    time to late wake-ups (then: the highest median lateness); None: no loop was watched."""
    watched = [p for p in block["processes"] if p["late"] is not None]
    return max(watched, key=lambda p: (p["late"]["share"], p["loop_lag_ms"]["median"]),
               default=None)


def _one(process: int, runs: Sequence[RequestRun], shape: Shape) -> dict[str, Any]:
    wall = sum(run.duration_s for run in runs)
    metrics = [derive(r, run.origin_ns) for run in runs for r in run.records]
    ok = [m for m in metrics if m.ok]
    tokens = sum(m.output_tokens for m in ok)
    lags = [lag for run in runs for lag in run.loop_lags_s]
    return {
        "process": process,
        "concurrency": shape.concurrency if shape.mode != "rate" else None,
        "rate": shape.rate / shape.part[1] if shape.mode == "rate" else None,
        "max_in_flight": shape.max_in_flight,
        "completed": len(ok),
        "failed": len(metrics) - len(ok),
        "duration": wall,
        "request_throughput": len(ok) / wall if wall > 0 else 0.0,
        "output_throughput": tokens / wall if wall > 0 else 0.0,
        "total_output_tokens": tokens,
        "cpu_s": sum(run.cpu_s for run in runs),
        "cpu_utilization": _cpu(runs),
        "loop_lag_ms": summarize([x * 1000 for x in lags]) if lags else None,
        "late": lateness(lags, wall) if lags else None,
        "stopped": next((run.stopped for run in runs if run.stopped), None),
    }
