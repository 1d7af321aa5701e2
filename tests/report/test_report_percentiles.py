"""Percentiles as the levels hold them (pure): whatever `pNN_<metric>_ms` keys a level has,
in the tables (one group per percentile) and in the TTFT and ITL plots (one panel each,
TTFT on a log scale)."""

from __future__ import annotations

from typing import Any

import pytest
from inmemory import level, run

from orchestrator.report.comparison import compare
from orchestrator.report.latency_tables import latency_table
from orchestrator.report.percentiles import available, level_percentiles
from orchestrator.report.plots import percentile_figure
from orchestrator.runs.run_records import LevelResult


def with_percentiles(c: int, ttft: dict[str, float], **extra: Any) -> dict[str, Any]:
    """A level whose TTFT percentiles are `ttft` ({"p50": 40.0, ...}) and ITL a tenth of it."""
    keys: dict[str, Any] = {f"{p}_ttft_ms": v for p, v in ttft.items()} | {f"{p}_itl_ms": v / 10 for p, v in ttft.items()}
    return level(c, **keys, **extra)


def test_every_percentile_key_of_every_latency_is_read() -> None:
    keys: dict[str, Any] = {"p50_ttft_ms": 40.0, "p95_ttft_ms": 90.0, "p99.9_itl_ms": 31.5, "p99_e2el_ms": 1200.0,
                            "p99_tpot_ms": 9.0, "p99_ttft_content_ms": 400.0, "median_itl_ms": 12.0}  # fmt: skip
    result = LevelResult.model_validate(level(4, **keys))
    assert level_percentiles(result) == {
        "p50_ttft_ms": 40.0,
        "p95_ttft_ms": 90.0,
        "p99.9_itl_ms": 31.5,
        "p99_e2el_ms": 1200.0,
        "p99_tpot_ms": 9.0,
        "p99_ttft_content_ms": 400.0,
        "p50_itl_ms": 12.0,  # vLLM's files have a median, not a p50
        "p50_e2el_ms": 1000.0,
    }


def test_percentiles_are_in_model_time_when_the_level_has_it() -> None:
    result = LevelResult.model_validate(level(1, simulated=True, p99_ttft_ms=5.0))
    assert result.normalized is not None
    result.normalized["p99_ttft_ms"] = 100.0
    assert level_percentiles(result)["p99_ttft_ms"] == 100.0
    assert level_percentiles(result, model_time=False)["p99_ttft_ms"] == 5.0


def test_available_percentiles_are_the_union_in_order() -> None:
    tables = [{"p99_ttft_ms": 1.0, "p50_ttft_ms": 1.0}, {"p95_ttft_ms": 1.0, "p99.9_ttft_ms": 1.0, "p90_itl_ms": 1.0}]
    assert available(tables, "ttft") == [50.0, 95.0, 99.0, 99.9]
    assert available(tables, "itl") == [90.0]


def two_runs() -> Any:
    a = run("a", levels=[with_percentiles(1, {"p50": 40.0, "p90": 50.0, "p99": 60.0}),
                         with_percentiles(2, {"p50": 45.0, "p90": 55.0, "p99": 65.0})])  # fmt: skip
    b = run("b", levels=[with_percentiles(1, {"p50": 20.0, "p90": 25.0, "p95": 28.0, "p99": 30.0}),
                         with_percentiles(2, {"p50": 90.0, "p90": 110.0, "p95": 120.0, "p99": 130.0})])  # fmt: skip
    return compare([a, b])


def test_tables_have_one_group_per_percentile_any_run_has() -> None:
    table = latency_table(two_runs(), "ttft")
    groups = list(dict.fromkeys(c.group for c in table.columns if c.group))
    assert groups == ["P50 TTFT (ms)", "P90 TTFT (ms)", "P95 TTFT (ms)", "P99 TTFT (ms)"]
    assert table.rows[0] == ["1", "40.0", "20.0 (0.50x)", "50.0", "25.0 (0.50x)", "-", "28.0", "60.0", "30.0 (0.50x)"]
    assert table.strong >= {(0, 2), (1, 1)}  # the lower TTFT is the better one
    itl = latency_table(two_runs(), "itl")
    assert itl.rows[1][1:3] == ["4.5", "9.0 (2.00x)"]
    latency = latency_table(two_runs())  # P50 from the median, P99 as written
    assert [c.group for c in latency.columns[1::2]] == ["P50 latency (s)", "P99 latency (s)"]


def test_the_ttft_plot_is_on_a_log_scale_with_one_panel_per_percentile() -> None:
    figure = percentile_figure(two_runs(), "ttft")
    panels = figure.axes
    assert [axes.get_title() for axes in panels] == ["P50", "P90", "P95", "P99"]
    assert all(axes.get_yscale() == "log" for axes in panels)  # the panels share the y axis
    assert panels[0].get_ylabel() == "TTFT (ms, log scale)"
    p95 = panels[2]
    assert [list(line.get_ydata()) for line in p95.get_lines()] == [[28.0, 120.0]]  # run a has no P95
    itl = percentile_figure(two_runs(), "itl")
    assert itl.axes[0].get_yscale() == "linear" and itl.axes[0].get_ylabel() == "ITL (ms)"


def test_a_zero_has_no_place_on_the_log_scale() -> None:
    comparison = compare([run("a", levels=[with_percentiles(1, {"p50": 0.0}), with_percentiles(2, {"p50": 7.0})])])
    (line,) = percentile_figure(comparison, "ttft").axes[0].get_lines()
    assert list(line.get_xdata()) == [2.0] and list(line.get_ydata()) == [7.0]


@pytest.mark.parametrize("metric", ["ttft", "itl"])
def test_a_level_with_only_a_median_still_plots_it(metric: str) -> None:
    median: dict[str, Any] = {f"median_{metric}_ms": 12.0}
    comparison = compare([run("a", levels=[level(1, **median)])])
    figure = percentile_figure(comparison, metric)
    assert [axes.get_title() for axes in figure.axes] == ["P50"]
