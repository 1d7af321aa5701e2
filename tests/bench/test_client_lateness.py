"""The client's lateness and the /metrics schedule on plain values: what a level records of
its late wake-ups, the flags that say its latencies are unreliable, and how often a level is
scraped."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.bench.anomalies import level_flags
from orchestrator.bench.lateness import LATE_MS, lateness
from orchestrator.bench.server_metrics import PER_LEVEL, scrape_floor, scrape_interval
from orchestrator.runs.run_records import LevelResult


def test_lateness_counts_only_wake_ups_well_past_the_threshold() -> None:
    # 150 ms paused of every 160: each wake-up ~150 ms late, ~94% of the time lost
    paused = lateness([0.150] * 10, 1.6)
    assert paused["pauses"] == 10 and paused["share"] == pytest.approx(0.9375)
    assert paused["longest_ms"] == 150.0 and paused["late_ms"] == LATE_MS
    jittery = lateness([0.002] * 400 + [0.049] * 20, 10.0)  # a noisy host: never 50 ms late
    assert jittery["pauses"] == 0 and jittery["share"] == 0.0
    assert lateness([], 0.0)["share"] == 0.0


def level(**keys: Any) -> LevelResult:
    base = {"level": "c4", "mode": "closed", "max_concurrency": 4, "completed": 16, "duration": 2.0,
            "total_output_tokens": 16 * 64, "median_itl_ms": 12.0, "client_cpu_utilization": 0.1}
    return LevelResult.model_validate({**base, **keys})


@pytest.mark.parametrize(("keys", "flagged"), [
    ({"client_late": {"share": 0.2}}, True),
    ({"client_late": {"share": 0.19}, "client_loop_lag_ms": {"median": 140.0}}, False),  # the share rules
    ({"client_loop_lag_ms": {"median": 50.0}}, True),  # an older file: its median
    ({"client_loop_lag_ms": {"median": 49.0}}, False),
])
def test_a_late_client_says_its_latencies_are_unreliable(keys: dict[str, Any], flagged: bool) -> None:
    assert ("latency_unreliable" in level_flags(level(**keys))) is flagged


def test_a_zero_median_itl_with_several_tokens_a_request_is_flagged() -> None:
    assert "itl_batched" in level_flags(level(median_itl_ms=0.0))
    assert "itl_batched" not in level_flags(level(median_itl_ms=0.0, total_output_tokens=16))  # one token each
    assert "itl_batched" not in level_flags(level())


def test_every_level_gets_ten_scrapes_at_least() -> None:
    for wall_s, configured, floor in ((0.5, 1.0, scrape_floor(True, 0.05)), (1.0, 1.0, scrape_floor(False, None)),
                                      (30.0, 1.0, 0.1), (3.0, 5.0, 0.1)):
        t, scrapes = 0.0, 1  # the one at start
        while (t := t + scrape_interval(t, configured, floor)) < wall_s:
            scrapes += 1
        assert scrapes + 1 >= PER_LEVEL, (wall_s, scrapes)  # and the one at stop


def test_the_scrape_floor_and_the_plan_s_interval_bound_it() -> None:
    assert scrape_floor(False, None) == 0.1  # a server: at most 10 a second
    assert scrape_floor(True, 0.05) == 0.02  # a simulator at 0.05: its floor, scaled, not under 20 ms
    assert scrape_floor(True, 0.5) == 0.05
    assert scrape_interval(0.0, 1.0, 0.1) == 0.1
    assert scrape_interval(600.0, 1.0, 0.1) == 1.0  # a long level: the plan's interval
    assert scrape_interval(0.0, 0.05, 0.1) == 0.05  # the plan asked for oftener: it gets it
