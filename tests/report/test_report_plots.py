"""What the plots show besides the lines: the knee marked on the throughput curve, and
which plots a comparison gets."""

from __future__ import annotations

import pytest
from inmemory import level, run
from runmaker import Runs

from orchestrator.report.comparison import compare, compare_runs
from orchestrator.report.plots import KneeMark, comparison_plots, knee_marks, throughput_figure

pytestmark = pytest.mark.slow


def test_a_knee_that_is_a_measured_level_is_marked() -> None:
    flat = [level(1, output_throughput=50.0), level(2, output_throughput=100.0), level(4, output_throughput=101.0)]
    comparison = compare([
        run("a", levels=flat),  # doubling 2 -> 4 gains 1%: the knee is C=2
        run("b", levels=[level(1), level(2), level(4)]),  # still rising: no knee
        run("c", levels=[level(1), level(2), level(4)], knee=3),  # recorded between levels: no point
    ])  # fmt: skip
    assert [s.knee for s in comparison.series] == [2, None, 3]
    assert knee_marks(comparison.series) == [KneeMark(0, 2.0, 100.0, "knee C=2")]
    figure = throughput_figure(comparison)
    (axes,) = figure.axes
    assert [t.get_text() for t in axes.texts] == ["knee C=2"]
    assert axes.get_xscale() == "log"


def test_the_plots_of_real_runs(runs: Runs) -> None:
    plots = comparison_plots(compare_runs([runs.sim["kimi-nvfp4"], runs.varied]))
    assert [(p.name, p.wide) for p in plots] == [
        ("throughput", False), ("latency", False), ("ttft", True), ("itl", True), ("energy", False), ("cdf", True),
        ("server", True), ("timeline", True),
    ]  # fmt: skip
    assert all(p.png.startswith(b"\x89PNG\r\n\x1a\n") for p in plots)
