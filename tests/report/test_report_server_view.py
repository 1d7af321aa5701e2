"""The server's view of each level (its /metrics during the level): read from the level
results (pure), and from real runs of the simulator, whose batch limit makes requests wait."""

from __future__ import annotations

from typing import Any

import pytest
from inmemory import level, run
from runmaker import VARIED_BATCH_LIMIT, Runs

from orchestrator.report.comparison import compare, compare_runs
from orchestrator.report.plots import comparison_plots
from orchestrator.report.server_load import server_level, server_levels
from orchestrator.report.server_plots import server_figure
from orchestrator.runs.run_records import LevelResult

pytestmark = pytest.mark.slow

SCRAPED: dict[str, Any] = {
    "scrapes": 5,
    "max_running": 8.0, "mean_running": 6.5,
    "max_waiting": 3.0, "mean_waiting": 1.25,
    "max_kv_cache_usage": 0.91, "mean_kv_cache_usage": 0.6,
    "delta_preemptions": 2.0, "delta_generation_tokens": 4000.0,
    "timeline": [{"t_s": 0.0, "running": 0.0}],
}  # fmt: skip


def test_a_level_gives_its_means_peaks_and_preemptions() -> None:
    view = server_level(LevelResult.model_validate(level(8, server_metrics=SCRAPED)))
    assert view is not None
    assert (view.level, view.concurrency, view.scrapes, view.preemptions) == ("c8", 8.0, 5, 2.0)
    assert view.mean == {"kv_cache_usage": 0.6, "running": 6.5, "waiting": 1.25}
    assert view.peak == {"kv_cache_usage": 0.91, "running": 8.0, "waiting": 3.0}


def test_no_view_without_scrapes_or_for_a_rate_level() -> None:
    assert server_level(LevelResult.model_validate(level(8))) is None  # metrics_interval: null
    assert server_level(LevelResult.model_validate(level(8, server_metrics={"scrapes": 0}))) is None
    rate = level(1, mode="rate", request_rate=2.0, max_concurrency=None, server_metrics=SCRAPED)
    assert server_level(LevelResult.model_validate(rate)) is None  # no concurrency to plot against
    partial_view = server_level(LevelResult.model_validate(level(2, server_metrics={"scrapes": 2, "max_running": 2})))
    assert partial_view is not None and partial_view.peak == {"running": 2.0} and partial_view.preemptions is None


def test_the_plot_has_a_panel_per_figure_and_the_kv_cache_in_percent() -> None:
    comparison = compare([run("a", levels=[level(4, server_metrics={**SCRAPED, "max_kv_cache_usage": 0.3}),
                                           level(8, server_metrics=SCRAPED)])])  # fmt: skip
    figure = server_figure(comparison)
    kv, running, waiting, preemptions = figure.axes
    assert [a.get_title() for a in figure.axes] == [
        "KV-cache usage", "Running requests", "Waiting requests", "Preemptions during the level"]
    mean, peak = kv.get_lines()
    assert list(mean.get_ydata()) == [60.0, 60.0] and list(peak.get_ydata()) == [30.0, 91.0]
    assert (mean.get_linestyle(), peak.get_linestyle()) == ("-", "--")
    assert list(preemptions.get_lines()[0].get_ydata()) == [2.0, 2.0]
    assert list(waiting.get_lines()[1].get_xdata()) == [4.0, 8.0]
    assert running.get_xscale() == "log"
    no_metrics = compare([run("a")])
    assert [p.name for p in comparison_plots(no_metrics)] == ["throughput", "latency", "ttft", "itl"]


def test_real_runs_show_the_batch_limit_and_the_queue(runs: Runs) -> None:
    comparison = compare_runs([runs.sim["minimax-m2.5"], runs.varied])
    pivot, varied = comparison.series
    assert [v.level for v in server_levels(pivot)] == ["c1", "c2", "c4", "c8"]
    for view in server_levels(pivot):
        assert view.scrapes >= 2 and 0.0 <= view.peak["kv_cache_usage"] <= 1.0
        assert view.preemptions == 0.0
    views = {v.level: v for v in server_levels(varied)}
    assert list(views) == ["c1", "c2", "c4", "c8", "c16"]
    assert all(v.peak["running"] <= VARIED_BATCH_LIMIT for v in views.values())
    assert views["c16"].peak["waiting"] > 0  # 16 requests, 4 places: the rest queue
    assert "server" in [p.name for p in comparison_plots(comparison)]
