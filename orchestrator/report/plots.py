"""Plots of a comparison as PNG bytes (matplotlib, the `report` extra), one line per run:

- throughput against concurrency;
- P50 and P99 latency against throughput (P50 solid, P99 dashed);
- TTFT against concurrency;
- ITL against concurrency.

matplotlib's object API with the Agg canvas: no pyplot, no global state, no display.
Closed and batch levels only: rate levels have no concurrency to plot against.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import OrchError
from orchestrator.masking import mask
from orchestrator.report.comparison import Comparison
from orchestrator.report.figures import Point, concurrency_points

# Colour-blind-safe palette (Okabe-Ito), one colour per run.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
SIZE_IN = (7.0, 4.2)
DPI = 110


@dataclass(frozen=True)
class Plot:
    name: str  # file stem, e.g. "throughput"
    title: str
    png: bytes


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise OrchError(
            "plots need matplotlib, which is not installed",
            hint="pip install 'orch[report]' (or pip install matplotlib)",
        ) from None
    return Figure, FigureCanvasAgg


def _time_note(comparison: Comparison) -> str:
    return " (simulated runs in model time)" if comparison.model_time else ""


def _render(
    comparison: Comparison,
    title: str,
    xlabel: str,
    ylabel: str,
    lines: Callable[[list[Point]], list[tuple[list[float], list[float], str, str]]],
    *,
    log_x: bool = False,
) -> bytes:
    figure_class, canvas_class = _matplotlib()
    figure = figure_class(figsize=SIZE_IN, dpi=DPI)
    canvas_class(figure)
    axes = figure.add_subplot(1, 1, 1)
    for index, s in enumerate(comparison.series):
        colour = PALETTE[index % len(PALETTE)]
        for xs, ys, style, suffix in lines(concurrency_points(s.points)):
            if xs:
                axes.plot(xs, ys, style, color=colour, marker="o", markersize=4, linewidth=1.8,
                          label=mask(s.label + suffix))  # fmt: skip
    if log_x:
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter("{x:g}")
    axes.set_title(mask(title + _time_note(comparison)), fontsize=11)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8, frameon=False)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _pairs(points: list[Point], x: Callable[[Point], float | None], y: Callable[[Point], float | None]) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for p in points:
        xv, yv = x(p), y(p)
        if xv is not None and yv is not None:
            xs.append(xv)
            ys.append(yv)
    return xs, ys


def _by_concurrency(metric: Callable[[Point], float | None]) -> Callable[[list[Point]], list[tuple[list[float], list[float], str, str]]]:
    def lines(points: list[Point]) -> list[tuple[list[float], list[float], str, str]]:
        xs, ys = _pairs(points, lambda p: p.load, metric)
        return [(xs, ys, "-", "")]

    return lines


def _latency_lines(points: list[Point]) -> list[tuple[list[float], list[float], str, str]]:
    """In concurrency order: the line traces the sweep as the load rose."""
    ordered = sorted(points, key=lambda p: p.load)
    out = []
    for attribute, style, suffix in (("p50_e2el_ms", "-", " P50"), ("p99_e2el_ms", "--", " P99")):
        xs, ys = _pairs(ordered, lambda p: p.throughput, _in_seconds(attribute))
        out.append((xs, ys, style, suffix))
    return out


def _in_seconds(attribute: str) -> Callable[[Point], float | None]:
    def get(point: Point) -> float | None:
        ms = point.value(attribute)
        return None if ms is None else ms / 1000

    return get


def comparison_plots(comparison: Comparison) -> list[Plot]:
    """The four plots of a comparison, in report order."""
    return [
        Plot("throughput", "Output throughput against concurrency", _render(
            comparison, "Output throughput", "concurrency", "output tokens / s",
            _by_concurrency(lambda p: p.throughput), log_x=True)),
        Plot("latency", "P50 and P99 latency against throughput", _render(
            comparison, "Latency against throughput", "output tokens / s", "latency (s)", _latency_lines)),
        Plot("ttft", "Time to first token against concurrency", _render(
            comparison, "Time to first token (mean)", "concurrency", "TTFT (ms)",
            _by_concurrency(lambda p: p.mean_ttft_ms), log_x=True)),
        Plot("itl", "Inter-token latency against concurrency", _render(
            comparison, "Inter-token latency (mean)", "concurrency", "ITL (ms)",
            _by_concurrency(lambda p: p.mean_itl_ms), log_x=True)),
    ]  # fmt: skip
