"""Plots of a comparison as PNG bytes (matplotlib, the `report` extra), one colour per run:

- throughput against concurrency, each run's knee marked;
- P50 and P99 latency against throughput (P50 solid, P99 dashed);
- the latencies orchestrator/metrics.py gives a `plot` (TTFT on a log scale, ITL) against
  concurrency, one panel per percentile (percentile_plots.py);
- the CDFs of TTFT and latency at each run's knee or highest level (distribution_plots.py);
- the server's KV-cache usage, running and waiting requests and preemptions per level
  (server_plots.py);
- output tokens per joule against concurrency, where GPU telemetry exists (energy_plots.py);
- KV-cache usage, running and waiting requests and the GPUs' power over time through each
  run's knee level (timeline_plots.py).

Closed and batch levels only: rate levels have no concurrency to plot against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.metrics import LATENCIES
from orchestrator.report.comparison import Comparison
from orchestrator.report.distribution_plots import distribution_figure
from orchestrator.report.energy_plots import any_energy, energy_figure
from orchestrator.report.figures import Point, concurrency_points
from orchestrator.report.knee_timeline import knee_timelines
from orchestrator.report.percentile_plots import percentile_figure
from orchestrator.report.plot_canvas import (
    Plot,
    canvas,
    colour,
    concurrency_axis,
    png,
    run_legend,
    style,
    time_note,
)
from orchestrator.report.series import Series
from orchestrator.report.server_load import any_server_view
from orchestrator.report.server_plots import server_figure
from orchestrator.report.timeline_plots import timeline_figure

__all__ = ["KneeMark", "Plot", "comparison_plots", "knee_marks", "latency_figure", "percentile_figure", "throughput_figure"]


def _pairs(points: list[Point], x: Callable[[Point], float | None], y: Callable[[Point], float | None]) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for p in points:
        xv, yv = x(p), y(p)
        if xv is not None and yv is not None:
            xs.append(xv)
            ys.append(yv)
    return xs, ys


def _line(axes: Any, xs: list[float], ys: list[float], index: int, line: str = "-") -> None:
    if xs:
        axes.plot(xs, ys, line, color=colour(index), marker="o", markersize=4, linewidth=1.8)


@dataclass(frozen=True)
class KneeMark:
    run: int  # index of the series: its colour
    concurrency: float
    throughput: float
    text: str


def knee_marks(series: Sequence[Series]) -> list[KneeMark]:
    """Where each run's knee sits on its throughput curve: only a knee that is a level the
    run measured (a knee the sweep reported between levels has no point to mark)."""
    marks = []
    for index, s in enumerate(series):
        point = s.point_at(("c", float(s.knee))) if s.knee is not None else None
        if point is not None and point.completed:
            marks.append(KneeMark(index, point.load, point.output_throughput, f"knee C={s.knee}"))
    return marks


def throughput_figure(comparison: Comparison) -> Any:
    """Output throughput against concurrency; a ring and a note at each run's knee."""
    figure, (axes,) = canvas()
    for index, s in enumerate(comparison.series):
        xs, ys = _pairs(concurrency_points(s.points), lambda p: p.load, lambda p: p.output_throughput)
        _line(axes, xs, ys, index)
    for mark in knee_marks(comparison.series):
        axes.plot([mark.concurrency], [mark.throughput], linestyle="none", marker="o", markersize=12,
                  markerfacecolor="none", markeredgecolor=colour(mark.run), markeredgewidth=2, zorder=5)  # fmt: skip
        axes.annotate(mark.text, (mark.concurrency, mark.throughput), xytext=(-14, 12), textcoords="offset points",
                      ha="right", fontsize=8.5, color=colour(mark.run), fontweight="bold")  # fmt: skip
    concurrency_axis(axes)
    top = max((p.output_throughput for s in comparison.series for p in concurrency_points(s.points)), default=0.0)
    axes.set_ylim(0, top * 1.15 or 1.0)  # headroom for the knee notes
    style(axes, "Output throughput" + time_note(comparison), "concurrency", "output tokens / s")
    run_legend(figure, comparison)
    return figure


def latency_figure(comparison: Comparison) -> Any:
    """P50 and P99 latency against throughput, in concurrency order: the line traces the
    sweep as the load rose."""
    figure, (axes,) = canvas()
    for index, s in enumerate(comparison.series):
        ordered = concurrency_points(s.points)
        for attribute, line in (("p50_e2el_ms", "-"), ("p99_e2el_ms", "--")):
            xs, ys = _pairs(ordered, lambda p: p.output_throughput, _seconds(attribute))
            _line(axes, xs, ys, index, line)
    style(axes, "Latency against throughput" + time_note(comparison), "output tokens / s", "latency (s)")
    run_legend(figure, comparison, [("-", "P50"), ("--", "P99")])
    return figure


def _seconds(attribute: str) -> Callable[[Point], float | None]:
    def get(point: Point) -> float | None:
        ms = point.value(attribute)
        return None if ms is None else ms / 1000

    return get


def comparison_plots(comparison: Comparison) -> list[Plot]:
    """Every plot of a comparison, in report order (those without data left out)."""
    plots = [
        Plot("throughput", "Output throughput against concurrency", png(throughput_figure(comparison))),
        Plot("latency", "P50 and P99 latency against throughput", png(latency_figure(comparison))),
    ]
    plots += [
        Plot(m.name, f"{m.title} against concurrency, by percentile{' (log scale)' if m.plot == 'log' else ''}",
             png(percentile_figure(comparison, m.name)), wide=True)
        for m in LATENCIES if m.plot
    ]  # fmt: skip
    if any_energy(comparison):
        plots.append(Plot("energy", "Output tokens per joule against concurrency", png(energy_figure(comparison))))
    if comparison.distributions:
        plots.append(Plot("cdf", "Per-request TTFT and latency (CDF)", png(distribution_figure(comparison)), wide=True))
    if any_server_view(comparison.series):
        plots.append(Plot("server", "The server's view per level", png(server_figure(comparison)), wide=True))
    timelines = knee_timelines(comparison)
    if timelines:
        plots.append(Plot("timeline", "Through each run's knee level: the server's gauges and GPU power over time",
                          png(timeline_figure(comparison, timelines)), wide=True))
    return plots
