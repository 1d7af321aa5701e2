"""Aggregate one level's per-request metrics into the figures of its result file.

Keys follow `vllm bench serve --save-result` where the meaning matches (duration,
completed, failed, total_*_tokens, *_throughput, max_output_tokens_per_s,
max_concurrent_requests, mean/median/std/pNN of each latency in ms); the rest are ours
(reasoning split, errors by kind, finish reasons, goodput detail). The latencies and
throughputs are those of orchestrator/metrics.py.
Failed requests are kept out of every latency figure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from orchestrator.bench.request_record import RequestMetrics
from orchestrator.bench.stats import summarize
from orchestrator.metrics import (
    BY_NAME,
    CHOOSABLE,
    DEFAULT_PERCENTILES,
    LATENCIES,
    OBJECTIVES,
    stat_key,
    with_percentiles,
)
from orchestrator.plan.models import Slo


def objectives(slo: Slo) -> list[tuple[str, float]]:
    """The objectives that are set, as (metric name, limit in ms)."""
    limits = ((name, getattr(slo, f"{name}_ms")) for name in OBJECTIVES)
    return [(name, float(limit)) for name, limit in limits if limit is not None]


def meets_slo(metrics: RequestMetrics, slo: Slo, time_scale: float = 1.0) -> bool:
    """A successful request that meets every objective that is set. Against a simulator at
    time scale s the objectives hold in model time: a wall-clock figure x is x / s there."""
    if not metrics.ok:
        return False
    for name, limit in objectives(slo):
        value = metrics.value(BY_NAME[name])
        if value is None or value / time_scale > limit:
            return False
    return True


def slo_is_set(slo: Slo) -> bool:
    return bool(objectives(slo))


def max_concurrent(intervals: Sequence[tuple[float, float]]) -> int:
    """The largest number of overlapping [start, end) intervals."""
    events: list[tuple[float, int]] = []
    for start, end in intervals:
        events.append((start, 1))
        events.append((end, -1))
    events.sort()  # an end (-1) sorts before a start (+1) at the same instant
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def generating(requests: Sequence[RequestMetrics]) -> list[tuple[float, float]]:
    """Each request's (first token, last token) in seconds from the level's origin."""
    out = []
    for m in requests:
        if m.ttft_ms is not None and m.itls_ms:
            first = m.start_s + m.ttft_ms / 1000
            out.append((first, first + sum(m.itls_ms) / 1000))
    return out


def peak_tokens_per_second(token_times_s: Sequence[float]) -> float:
    """The busiest one-second bin of token arrivals (vllm's max_output_tokens_per_s)."""
    if not token_times_s:
        return 0.0
    bins = Counter(math.floor(t) for t in token_times_s)
    return float(max(bins.values()))


def summarize_level(
    requests: Sequence[RequestMetrics],
    *,
    duration_s: float,
    slo: Slo,
    token_times_s: Sequence[float] = (),
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    percentile_metrics: Sequence[str] = CHOOSABLE,
    time_scale: float | None = None,
) -> dict[str, Any]:
    """Headline figures of one level over its measured (non-warm-up) requests; goodput
    against the objectives in model time when `time_scale` (a simulator's) is given."""
    ok = [m for m in requests if m.ok]
    good = sum(1 for m in ok if meets_slo(m, slo, time_scale or 1.0))
    return {
        **_headline(requests, duration_s, good if slo_is_set(slo) else None, token_times_s),
        **_latencies(ok, percentiles, percentile_metrics),
        **_detail(requests, duration_s, good if slo_is_set(slo) else None),
    }


def _headline(requests: Sequence[RequestMetrics], duration_s: float, good: int | None,
              token_times_s: Sequence[float]) -> dict[str, Any]:
    """vllm's counts, tokens and rates (goodput None without objectives), and the peaks."""
    ok = [m for m in requests if m.ok]
    duration = max(duration_s, 1e-9)
    output_tokens = sum(m.output_tokens for m in ok)
    input_tokens = sum(m.input_tokens or 0 for m in ok)
    return {
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(requests) - len(ok),
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": len(ok) / duration,
        "request_goodput": good / duration if good is not None else None,
        "output_throughput": output_tokens / duration,
        "total_token_throughput": (input_tokens + output_tokens) / duration,
        "max_output_tokens_per_s": peak_tokens_per_second(token_times_s),
        "max_concurrent_requests": max_concurrent([(m.start_s, m.end_s) for m in requests]),
        # How many were generating at once, from the server's answers: a server that runs
        # one request at a time never overlaps two, whatever the client holds in flight.
        "max_generating": max_concurrent(generating(ok)),
    }


def _latencies(ok: Sequence[RequestMetrics], percentiles: Sequence[float],
               percentile_metrics: Sequence[str]) -> dict[str, Any]:
    """Each latency's statistics (`mean_ttft_ms`, `p99_itl_ms`, ...) over the successful
    requests; the percentiles only of the metrics chosen for them."""
    out: dict[str, Any] = {}
    chosen = with_percentiles(percentile_metrics)
    for metric in LATENCIES:
        samples = [x for m in ok for x in m.samples(metric)]
        stats = summarize(samples, percentiles if metric.name in chosen else ())
        empty = metric.null_when_empty and not samples
        for stat, value in stats.items():
            out[stat_key(stat, metric.name)] = None if empty else value
    return out


def _detail(requests: Sequence[RequestMetrics], duration_s: float,
            good: int | None) -> dict[str, Any]:
    """orch's own figures: the reasoning split, token sources, objectives met, failures by
    kind and message, retries and finish reasons."""
    ok = [m for m in requests if m.ok]
    failed = [m for m in requests if not m.ok]
    duration = max(duration_s, 1e-9)
    output_tokens = sum(m.output_tokens for m in ok)
    input_tokens = sum(m.input_tokens or 0 for m in ok)
    reasoning = sum(m.reasoning_tokens for m in ok)
    return {
        "total_reasoning_tokens": reasoning,
        "total_content_tokens": output_tokens - reasoning,
        "reasoning_throughput": reasoning / duration,
        "content_throughput": (output_tokens - reasoning) / duration,
        "mean_output_tokens": output_tokens / len(ok) if ok else 0.0,
        # the server's prompt_tokens: on chat, the prompt plus its chat template
        "mean_input_tokens": input_tokens / len(ok) if ok else 0.0,
        "itl_source": _token_source(Counter(m.itl_source for m in ok)),
        "token_source": _token_source(Counter(m.token_source for m in ok)),
        "requests_meeting_slo": good,
        "slo_attainment": (good / len(ok) if ok else 0.0) if good is not None else None,
        "errors": dict(Counter(m.error_kind or "unknown" for m in failed)),
        "error_messages": error_messages(failed),
        "retried": sum(1 for m in requests if m.retried),
        "finish_reasons": dict(Counter(m.finish_reason or "none" for m in ok)),
        "hit_max_tokens": sum(1 for m in ok if m.finish_reason == "length"),
    }


def error_messages(failed: Sequence[RequestMetrics], top: int = 5) -> list[dict[str, Any]]:
    """Failures grouped by what the server said, the most frequent first."""
    groups = Counter((m.error_kind or "unknown", m.error or "") for m in failed)
    return [{"kind": kind, "message": message, "count": count}
            for (kind, message), count in groups.most_common(top)]


def _token_source(sources: Counter[str]) -> str:
    if not sources:
        return "none"
    if len(sources) == 1:
        return next(iter(sources))
    return "mixed"
