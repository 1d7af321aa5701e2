"""A latency's percentiles against concurrency (those orchestrator/metrics.py gives a
`plot`: TTFT and ITL), one panel per percentile the levels hold (P50, P90,
P95, P99, ...), one line per run, the panels sharing their y axis so the tail reads against
the median.

TTFT is drawn on a log scale: past the knee, requests queue and the tail's TTFT grows by
orders of magnitude (26 s at C=256 against 0.05 s at C=1), which would flatten every other
point on a linear axis.
"""

from __future__ import annotations

from typing import Any

from orchestrator.metrics import BY_NAME, percentile_stat_key
from orchestrator.report.comparison import Comparison
from orchestrator.report.figures import concurrency_points
from orchestrator.report.percentiles import available, label
from orchestrator.report.plot_canvas import (
    canvas,
    colour,
    concurrency_axis,
    log_scale,
    run_legend,
    style,
    time_note,
)


def percentile_figure(comparison: Comparison, metric: str) -> Any:
    described = BY_NAME[metric]
    log = described.plot == "log"
    ylabel = f"{described.label} ({described.unit}{', log scale' if log else ''})"
    found = available((p.percentiles for s in comparison.series for p in s.points), metric) or [50.0]
    figure, panels = canvas(len(found), wide=True, sharey=True)
    for p, axes in zip(found, panels, strict=True):
        key = percentile_stat_key(p, metric)
        for index, s in enumerate(comparison.series):
            pairs = [(q.load, v) for q in concurrency_points(s.points) if (v := q.value(key)) is not None]
            if log:
                pairs = [(x, y) for x, y in pairs if y > 0]  # a zero has no place on a log axis
            if pairs:
                xs, ys = zip(*pairs, strict=True)
                axes.plot(xs, ys, "-", color=colour(index), marker="o", markersize=4, linewidth=1.8)
        concurrency_axis(axes)
        style(axes, label(p), "concurrency", ylabel if axes is panels[0] else "")
    if log:
        log_scale(panels[0], "y")
    else:
        panels[0].set_ylim(bottom=0)
    figure.suptitle(described.title + time_note(comparison), fontsize=11.5)
    run_legend(figure, comparison)
    return figure
