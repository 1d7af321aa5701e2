"""Arrivals, anomaly flags, normalization, the CSV and the final table (pure logic)."""

from __future__ import annotations

import csv
import io
import itertools
import statistics

import pytest
from rich.console import Console

from orchestrator.bench.anomalies import (
    effective_concurrency,
    flags_against,
    level_flags,
    no_scaling,
    throughput_drops,
)
from orchestrator.bench.arrivals import arrival_offsets, requests_for_rate
from orchestrator.bench.results import csv_columns, csv_row, normalized, render_csv
from orchestrator.bench.table import render_table
from orchestrator.runs.run_records import LevelResult
from orchestrator.tables import TableData, to_rich


def test_constant_arrivals_are_evenly_spaced() -> None:
    assert arrival_offsets(4, 2.0, kind="constant") == [0.0, 0.5, 1.0, 1.5]


@pytest.mark.parametrize(("burstiness", "cv"), [(1.0, 1.0), (4.0, 0.5), (0.25, 2.0)])
def test_gamma_arrivals_have_the_configured_rate_and_burstiness(burstiness: float, cv: float) -> None:
    offsets = arrival_offsets(20_001, 10.0, burstiness=burstiness, seed=7)
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.1, rel=0.05)
    # gamma with shape s has a coefficient of variation of 1/sqrt(s)
    assert statistics.pstdev(gaps) / mean == pytest.approx(cv, rel=0.08)


def test_arrivals_are_reproducible_by_seed() -> None:
    assert arrival_offsets(50, 3.0, seed=1) == arrival_offsets(50, 3.0, seed=1)
    assert arrival_offsets(50, 3.0, seed=1) != arrival_offsets(50, 3.0, seed=2)
    assert arrival_offsets(0, 3.0) == []


@pytest.mark.parametrize(("kwargs", "message"), [({"rate": 0.0}, "rate"), ({"rate": 1.0, "burstiness": 0.0}, "burstiness")])
def test_arrivals_reject_bad_parameters(kwargs: dict[str, float], message: str) -> None:
    rate = kwargs.pop("rate")
    with pytest.raises(ValueError, match=message):
        arrival_offsets(3, rate, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("spec", "rate", "count"), [(10, 2.0, 10), ("2x", 4.0, 8), ("1x", 0.2, 1), ("0.5x", 9.0, 4)])
def test_requests_for_rate(spec: int | str, rate: float, count: int) -> None:
    assert requests_for_rate(spec, rate) == count


@pytest.mark.parametrize(
    ("levels", "drops"),
    [
        ([(1, 61.3), (2, 57.8), (4, 93.7), (8, 276.6)], [1]),  # the motivating run
        ([(1, 10.0), (2, 9.95)], []),  # within the 1% tolerance
        ([(4, 30.0), (1, 10.0), (2, 20.0)], []),  # order of running does not matter
        ([(1, 10.0), (2, 20.0), (4, 15.0), (8, 14.0)], [2, 3]),
    ],
)
def test_throughput_drops(levels: list[tuple[float, float]], drops: list[int]) -> None:
    assert throughput_drops(levels) == drops


@pytest.mark.parametrize(
    ("result", "flags"),
    [
        ({"failed": 0, "output_throughput": 100.0}, []),
        ({"failed": 2}, ["errors"]),
        ({"spread": 0.15}, ["spread"]),
        ({"client_cpu_utilization": 0.97}, ["client_saturated"]),
        ({"output_throughput": 100.0, "server_metrics": {"server_output_throughput": 150.0}}, ["server_disagrees"]),
        ({"output_throughput": 100.0, "server_metrics": {"server_output_throughput": 104.0}}, []),
        # Same tokens, but the scrape span was longer than the level: not a disagreement.
        ({"output_throughput": 100.0, "total_output_tokens": 64,
          "server_metrics": {"server_output_throughput": 78.0, "delta_generation_tokens": 64}}, []),
        ({"output_throughput": 100.0, "total_output_tokens": 64,
          "server_metrics": {"server_output_throughput": 100.0, "delta_generation_tokens": 90}},
         ["server_disagrees"]),
        ({"partial": True}, ["partial"]),
        ({"mode": "closed", "max_concurrency": 4, "completed": 8, "max_generating": 1}, ["serialized"]),
        # the server's own gauge saw two at once: not serialized, whatever the spans say
        ({"mode": "closed", "max_concurrency": 4, "completed": 8, "max_generating": 1,
          "server_metrics": {"max_running": 2}}, []),
        ({"mode": "closed", "max_concurrency": 1, "completed": 8, "max_generating": 1}, []),
        ({"mode": "rate", "max_concurrency": 4, "completed": 8, "max_generating": 1}, []),
        # the server ran 2 of the 4 asked through a sampled level: capped; too few scrapes
        # to be sure, or a rate level: no claim
        ({"mode": "closed", "max_concurrency": 4, "completed": 8, "max_generating": 2,
          "server_metrics": {"max_running": 2, "max_waiting": 2, "scrapes": 5}}, ["capped"]),
        ({"mode": "closed", "max_concurrency": 4, "completed": 8, "max_generating": 2,
          "server_metrics": {"max_running": 2, "max_waiting": 2, "scrapes": 2}}, []),
        ({"mode": "closed", "max_concurrency": 4, "completed": 8, "max_generating": 4,
          "server_metrics": {"max_running": 4, "max_waiting": 0, "scrapes": 5}}, []),
        # a batch level's tail: one long answer runs alone at every scrape, nothing waits
        ({"mode": "batch", "max_concurrency": 4, "completed": 4, "max_generating": 4,
          "max_concurrent_requests": 4,
          "server_metrics": {"max_running": 1, "max_waiting": 0, "scrapes": 5}}, []),
        # the client never held its C (and the level had C requests): capped, by the client
        ({"mode": "closed", "max_concurrency": 8, "completed": 16, "max_generating": 3,
          "max_concurrent_requests": 3,
          "server_metrics": {"max_running": 3, "max_waiting": 0, "scrapes": 5}}, ["capped"]),
    ],
)
def test_level_flags(result: dict[str, object], flags: list[str]) -> None:
    level = LevelResult.model_validate(result)
    level.effective_concurrency = effective_concurrency(level)
    assert level_flags(level) == flags


@pytest.mark.parametrize(
    ("levels", "flat"),
    [
        ([(1, 100.0), (4, 109.0), (8, 111.0)], [1]),  # within 10% of C=1 at 4x the load
        ([(1, 100.0), (2, 150.0), (4, 300.0)], []),
        ([(4, 100.0), (1, 100.0)], [0]),  # the lowest load is the base, wherever it ran
        ([(1, 100.0), (1.5, 100.0)], []),  # under twice the load: not judged
        ([(1, 100.0)], []),
        ([(1, 0.0), (4, 0.0)], []),  # nothing measured at the base: no claim
    ],
)
def test_no_scaling(levels: list[tuple[float, float]], flat: list[int]) -> None:
    assert no_scaling(levels) == flat


@pytest.mark.parametrize(
    ("earlier", "level", "flags"),
    [
        ([], (1, 100.0), []),  # the first level: nothing to judge it by
        ([(1, 100.0)], (1.5, 90.0), ["throughput_drop"]),
        ([(1, 100.0), (2, 180.0)], (4, 105.0), ["throughput_drop", "no_scaling"]),
        ([(1, 100.0), (2, 180.0)], (4, 300.0), []),
        # bisection: judged against the nearest lower load that ran before it
        ([(1, 100.0), (2, 180.0), (8, 150.0)], (4, 170.0), ["throughput_drop"]),
        # a level below every earlier one is the new base: no claim about it
        ([(8, 100.0)], (1, 100.0), []),
    ],
)
def test_flags_against_the_levels_before(earlier: list[tuple[float, float]],
                                         level: tuple[float, float], flags: list[str]) -> None:
    assert flags_against(earlier, level) == flags


def test_normalized_figures_are_in_model_time() -> None:
    raw = {"duration": 2.0, "mean_ttft_ms": 10.0, "output_throughput": 5000.0, "completed": 8, "mode": "closed"}
    assert normalized(raw, 0.05) == {
        "time_scale": 0.05,
        "duration": pytest.approx(40.0),
        "mean_ttft_ms": pytest.approx(200.0),
        "output_throughput": pytest.approx(250.0),
    }


def _result(c: int, throughput: float, **extra: object) -> LevelResult:
    return LevelResult.model_validate({
        "level": f"c{c}", "mode": "closed", "max_concurrency": c, "request_rate": "inf",
        "output_throughput": throughput, "mean_e2el_ms": 8360.0, "median_e2el_ms": 8360.0,
        "p99_e2el_ms": 8360.0, "mean_ttft_ms": 120.0, "mean_itl_ms": 16.3, "completed": 8,
        "failed": 0, "flags": [], **extra,
    })


def test_csv_has_one_row_per_level_with_the_documented_columns() -> None:
    columns = csv_columns()
    text = render_csv([_result(1, 61.3), _result(2, 57.8, flags=["throughput_drop"])], columns)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == columns
    assert [r["concurrency"] for r in rows] == ["1", "2"]
    assert rows[1]["flags"] == "throughput_drop"
    assert rows[0]["normalized_output_throughput"] == ""
    assert rows[0]["p99_e2el_ms"] == "8360.0" and rows[0]["p95_e2el_ms"] == ""


def test_csv_columns_follow_the_chosen_percentiles_and_metrics() -> None:
    default = csv_columns()
    for metric in ("ttft", "tpot", "itl", "e2el"):
        assert [c for c in default if c.endswith(f"_{metric}_ms") and c[0] == "p" and c[1].isdigit()] == [
            f"p50_{metric}_ms", f"p90_{metric}_ms", f"p95_{metric}_ms", f"p99_{metric}_ms"]
    chosen = csv_columns([99.9, 75], ["ttft"])
    assert [c for c in chosen if c[0] == "p" and c[1].isdigit()] == ["p99.9_ttft_ms", "p75_ttft_ms"]
    assert "mean_itl_ms" in chosen and "mean_ttft_content_ms" in chosen


def test_a_missing_figure_is_null_in_the_summary_and_empty_in_the_csv() -> None:
    result = _result(1, 61.3, request_goodput=None)
    assert csv_row(result, csv_columns())["request_goodput"] is None
    (row,) = csv.DictReader(io.StringIO(render_csv([result], csv_columns())))
    assert row["request_goodput"] == ""


def _text(table: TableData, width: int = 160) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(to_rich(table, width))
    return console.export_text()


def test_the_table_reads_like_the_motivating_run() -> None:
    text = _text(render_table([_result(1, 61.3), _result(2, 57.8, flags=["throughput_drop"])], knee=1))
    for heading in ("Concurrency", "Throughput", "(tok/s)", "Avg", "latency", "P50", "P99", "TTFT", "ITL"):
        assert heading in text
    assert "failed" not in text  # said only when something failed
    assert "61.3" in text and "8.36" in text and "16.3" in text
    assert "knee" in text and "drop" in text
    assert "model time" not in text and "Goodput" not in text


def test_every_percentile_and_goodput_get_a_column() -> None:
    levels = [_result(1, 61.3, p90_e2el_ms=8400.0, p95_e2el_ms=8500.0, request_goodput=0.12),
              _result(2, 57.8, p90_e2el_ms=9400.0, p95_e2el_ms=9500.0, request_goodput=None)]
    text = _text(render_table(levels))
    header = text.splitlines()[1:4]
    assert all(p in " ".join(header) for p in ("P50", "P90", "P95", "P99", "Goodput"))
    cells = [line.replace("│", " ").split() for line in text.splitlines()]
    assert ["1", "61.3", "8.36", "8.36", "8.40", "8.50", "8.36", "120.0", "16.3", "0.12"] in cells
    assert ["2", "57.8", "8.36", "8.36", "9.40", "9.50", "8.36", "120.0", "16.3", "-"] in cells


def test_a_simulated_run_is_shown_in_model_time_and_says_so() -> None:
    result = _result(1, 1226.0, normalized={"output_throughput": 61.3, "mean_e2el_ms": 8360.0, "mean_ttft_ms": 2400.0})
    text = _text(render_table([result], time_scale=0.05))
    assert "61.3" in text and "1,226" not in text
    assert "time scale 0.05" in text and "model time" in text


def test_failures_are_noted_and_the_table_fits_80_columns() -> None:
    levels = [_result(1, 61.3, p90_e2el_ms=8400.0, p95_e2el_ms=8500.0),
              _result(2, 57.8, failed=3, flags=["errors", "throughput_drop"], p90_e2el_ms=1.0,
                      p95_e2el_ms=2.0)]
    table = render_table(levels, knee=1)
    text = _text(table, 80)
    assert "knee" in text and "…" not in text  # narrow: notes fold, figures stay whole
    assert "57.8" in text and "8.36" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "left out at 80 columns: P90 (s), P95 (s)" in " ".join(text.split())
    assert "3 failed, drop" in _text(table, 200)


def test_the_progress_line_counts_requests_tokens_and_failures() -> None:
    from orchestrator.bench.load import RequestRun
    from orchestrator.bench.progress import progress_of
    from orchestrator.bench.request_record import RequestRecord
    from orchestrator.live_view import progress_line

    run = RequestRun(origin_ns=1_000_000_000)
    done = RequestRecord("a", end_ns=2, token_ns=[1, 2, 3])
    failed = RequestRecord("b", end_ns=2)
    failed.fail("timeout", "slow")
    running = RequestRecord("c", token_ns=[1])
    run.records.extend([done, failed, running])
    text = progress_line(progress_of("h", "c8", run, 10, now_ns=3_000_000_000)).plain
    assert "2/10 requests" in text and "2.0 s" in text and "2 tok/s" in text and "1 failed" in text


def test_a_level_warms_up_every_batch_size_it_will_run() -> None:
    from orchestrator.bench.level import LevelSpec, warm_up_shape

    closed = warm_up_shape(LevelSpec(mode="closed", concurrency=8, requests=16), warmup=1)
    assert (closed.mode, closed.concurrency, closed.count) == ("closed", 8, 8)
    assert warm_up_shape(LevelSpec(mode="batch", concurrency=2), warmup=4).count == 4
    rate = warm_up_shape(LevelSpec(mode="rate", rate=5.0, requests=50), warmup=2)
    assert (rate.concurrency, rate.count) == (1, 2)
