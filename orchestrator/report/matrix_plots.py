"""The plots of a matrix run (report/matrix.py): one per metric against concurrency, a line
per variant labelled by the values that vary, the best variant for the objective drawn
thicker and named in the legend, the level its score was reached at ringed:

- output throughput (tok/s);
- mean end-to-end latency (s);
- P99 time to first token (s);
- output tokens per joule, when a variant's GPUs were sampled.

Colours follow the comparison's series, so a variant keeps its colour in every plot of the
report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.report.energy_table import PER_JOULE
from orchestrator.report.figures import Point, concurrency_points
from orchestrator.report.matrix import MatrixComparison, VariantResult
from orchestrator.report.plot_canvas import (
    LineStyle,
    Plot,
    canvas,
    colour,
    concurrency_axis,
    legend,
    png,
    style,
)


@dataclass(frozen=True)
class MatrixMetric:
    name: str  # plot file stem
    title: str
    ylabel: str
    value: Callable[[Point], float | None]


def _ms_to_s(key: str) -> Callable[[Point], float | None]:
    def get(point: Point) -> float | None:
        ms = point.value(key)
        return None if ms is None else ms / 1000

    return get


METRICS = (
    MatrixMetric("matrix-throughput", "Output throughput", "output tokens / s", lambda p: p.output_throughput),
    MatrixMetric("matrix-latency", "Mean latency", "latency (s)", _ms_to_s("mean_e2el_ms")),
    MatrixMetric("matrix-ttft", "P99 time to first token", "P99 TTFT (s)", _ms_to_s("p99_ttft_ms")),
    MatrixMetric("matrix-energy", "Output tokens per joule", "output tokens / J",
                 lambda p: p.throughputs.get(PER_JOULE)),
)  # fmt: skip


def variant_lines(matrix: MatrixComparison, metric: MatrixMetric) -> list[tuple[VariantResult, int, list[float], list[float]]]:
    """(variant, colour index, concurrencies, values) of each variant with that metric."""
    colours = {s.label: i for i, s in enumerate(matrix.comparison.series)} if matrix.comparison else {}
    lines = []
    for result in matrix.results:
        if result.series is None:
            continue
        pairs = [(p.load, v) for p in concurrency_points(result.series.points) if (v := metric.value(p)) is not None]
        if pairs:
            lines.append((result, colours.get(result.label, 0), [x for x, _ in pairs], [y for _, y in pairs]))
    return lines


def matrix_figure(matrix: MatrixComparison, metric: MatrixMetric) -> Any:
    figure, (axes,) = canvas()
    best = matrix.best
    entries: list[tuple[str, LineStyle, str]] = []
    for result, index, xs, ys in variant_lines(matrix, metric):
        top = result is best
        axes.plot(xs, ys, "-", color=colour(index), marker="o", markersize=5 if top else 3.5,
                  linewidth=3.2 if top else 1.5, zorder=4 if top else 2)  # fmt: skip
        if top and result.at is not None and (value := metric.value(result.at)) is not None:
            axes.plot([result.at.load], [value], linestyle="none", marker="o", markersize=12, markerfacecolor="none",
                      markeredgecolor=colour(index), markeredgewidth=2, zorder=5)  # fmt: skip
        entries.append((colour(index), "-", f"{result.label} (best)" if top else result.label))
    concurrency_axis(axes)
    axes.set_ylim(0, max(axes.get_ylim()[1], 1e-3))
    model = " (model time)" if matrix.comparison and matrix.comparison.model_time else ""
    style(axes, f"{metric.title} by variant{model}", "concurrency", metric.ylabel)
    legend(figure, entries)
    return figure


def matrix_plots(matrix: MatrixComparison) -> list[Plot]:
    """A plot per metric some variant has, in METRICS order."""
    return [Plot(m.name, f"{m.title} by variant against concurrency", png(matrix_figure(matrix, m)))
            for m in METRICS if variant_lines(matrix, m)]
