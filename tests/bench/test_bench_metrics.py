"""Per-request and per-level metrics on constructed timelines (times in ms -> ns)."""

from __future__ import annotations

import pytest

from orchestrator.bench.level_metrics import (
    max_concurrent,
    meets_slo,
    peak_tokens_per_second,
    summarize_level,
)
from orchestrator.bench.request_record import RequestRecord, derive
from orchestrator.plan.models import Slo

MS = 1_000_000


def record(
    start_ms: float,
    tokens_ms: list[float],
    *,
    reasoning: int = 0,
    end_ms: float | None = None,
    usage: int | None = None,
    usage_reasoning: int | None = None,
    error: str | None = None,
    finish: str | None = "stop",
) -> RequestRecord:
    """A finished record: the first `reasoning` token chunks are reasoning, the rest content."""
    r = RequestRecord("r", start_ns=int(start_ms * MS))
    r.token_ns = [int(t * MS) for t in tokens_ms]
    r.reasoning_chunks = min(reasoning, len(tokens_ms))
    r.content_chunks = len(tokens_ms) - r.reasoning_chunks
    if r.content_chunks:
        r.first_content_ns = r.token_ns[r.reasoning_chunks]
    r.end_ns = int((end_ms if end_ms is not None else (tokens_ms[-1] if tokens_ms else start_ms)) * MS)
    r.completion_tokens = usage
    r.usage_reasoning_tokens = usage_reasoning
    r.finish_reason = finish
    if error:
        r.fail(error, "boom")
    return r


@pytest.mark.parametrize(
    ("rec", "expected"),
    [
        # 200 ms TTFT, then 20 ms between tokens, 2 reasoning chunks first
        (
            record(0, [200, 220, 240, 260], reasoning=2, end_ms=261, usage=4),
            dict(ttft_ms=200.0, ttft_content_ms=240.0, e2el_ms=261.0, tpot_ms=61 / 3,
                 itls_ms=(20.0, 20.0, 20.0), output_tokens=4, token_source="usage",
                 reasoning_tokens=2, content_tokens=2),
        ),
        # no usage: tokens are counted from chunks
        (
            record(100, [150, 160], end_ms=170),
            dict(ttft_ms=50.0, ttft_content_ms=50.0, e2el_ms=70.0, tpot_ms=20.0,
                 itls_ms=(10.0,), output_tokens=2, token_source="counted",
                 reasoning_tokens=0, content_tokens=2),
        ),
        # chunks carrying several tokens: usage wins, TPOT uses usage
        (
            record(0, [10, 30], end_ms=30, usage=9),
            dict(ttft_ms=10.0, e2el_ms=30.0, tpot_ms=2.5, output_tokens=9, token_source="usage"),
        ),
        # the server reports reasoning tokens in usage details: they win over the count
        (
            record(0, [10, 20, 30], reasoning=1, usage=3, usage_reasoning=2),
            dict(reasoning_tokens=2, content_tokens=1),
        ),
        # only reasoning: no content TTFT
        (
            record(0, [5, 6], reasoning=2, usage=2),
            dict(ttft_ms=5.0, ttft_content_ms=None, reasoning_tokens=2, content_tokens=0),
        ),
        # a single token: no TPOT, no ITL
        (record(0, [7], usage=1), dict(tpot_ms=None, itls_ms=(), ttft_ms=7.0)),
    ],
)
def test_request_metrics(rec: RequestRecord, expected: dict[str, object]) -> None:
    metrics = derive(rec, origin_ns=0)
    for key, value in expected.items():
        actual = getattr(metrics, key)
        if isinstance(value, (float, tuple)):
            assert actual == pytest.approx(value), key
        else:
            assert actual == value, key


def test_level_figures_exclude_failed_requests_from_latency() -> None:
    ok1 = derive(record(0, [100, 110, 120], usage=3, end_ms=120), 0)
    ok2 = derive(record(0, [300, 310, 320], usage=3, end_ms=320), 0)
    bad = derive(record(0, [], error="connect_refused", finish=None), 0)
    level = summarize_level([ok1, ok2, bad], duration_s=2.0, slo=Slo())
    assert level["completed"] == 2
    assert level["failed"] == 1
    assert level["errors"] == {"connect_refused": 1}
    assert level["total_output_tokens"] == 6
    assert level["output_throughput"] == pytest.approx(3.0)
    assert level["request_throughput"] == pytest.approx(1.0)
    assert level["mean_ttft_ms"] == pytest.approx(200.0)
    assert level["median_ttft_ms"] == pytest.approx(200.0)
    assert level["p99_ttft_ms"] == pytest.approx(100 + 200 * 0.99)
    assert level["mean_itl_ms"] == pytest.approx(10.0)
    assert level["mean_e2el_ms"] == pytest.approx(220.0)
    assert level["request_goodput"] is None
    assert level["finish_reasons"] == {"stop": 2}
    assert level["token_source"] == "usage"


def test_goodput_counts_requests_meeting_every_objective() -> None:
    fast = derive(record(0, [100, 110], usage=2), 0)
    slow = derive(record(0, [900, 910], usage=2), 0)
    slo = Slo(ttft_ms=500)
    assert meets_slo(fast, slo) and not meets_slo(slow, slo)
    level = summarize_level([fast, slow], duration_s=4.0, slo=slo)
    assert level["request_goodput"] == pytest.approx(0.25)
    assert level["slo_attainment"] == pytest.approx(0.5)


def test_hits_of_max_tokens_and_token_sources_are_reported() -> None:
    a = derive(record(0, [1, 2], usage=2, finish="length"), 0)
    b = derive(record(0, [1, 2], finish="stop"), 0)
    level = summarize_level([a, b], duration_s=1.0, slo=Slo())
    assert level["hit_max_tokens"] == 1
    assert level["token_source"] == "mixed"


@pytest.mark.parametrize(
    ("intervals", "peak"),
    [
        ([], 0),
        ([(0, 1)], 1),
        ([(0, 1), (1, 2)], 1),  # back to back: never two at once
        ([(0, 2), (1, 3), (1.5, 1.6)], 3),
        ([(0, 10)] + [(i, i + 0.5) for i in range(5)], 2),
    ],
)
def test_max_concurrent(intervals: list[tuple[float, float]], peak: int) -> None:
    assert max_concurrent(intervals) == peak


def test_peak_tokens_per_second_is_the_busiest_one_second_bin() -> None:
    assert peak_tokens_per_second([]) == 0.0
    assert peak_tokens_per_second([0.1, 0.2, 1.5, 1.6, 1.7, 3.0]) == 3.0
