"""Output tokens per joule against concurrency, one line per run whose GPUs were sampled
(the level's `output_tokens_per_joule`: its output tokens over the energy nvidia-smi's power
readings give for the level); each run's most efficient level ringed. A run without GPU
telemetry has no line, and a comparison without any has no plot."""

from __future__ import annotations

from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.energy_table import PER_JOULE, best_per_joule
from orchestrator.report.figures import concurrency_points
from orchestrator.report.plot_canvas import (
    canvas,
    colour,
    concurrency_axis,
    legend,
    style,
    time_note,
)


def energy_points(comparison: Comparison) -> list[tuple[int, list[float], list[float]]]:
    """(run index, concurrencies, tokens per joule) of each run that has them."""
    lines = []
    for index, s in enumerate(comparison.series):
        pairs = [(p.load, p.throughputs[PER_JOULE]) for p in concurrency_points(s.points)
                 if p.throughputs.get(PER_JOULE) is not None]
        if pairs:
            lines.append((index, [x for x, _ in pairs], [y for _, y in pairs]))
    return lines


def any_energy(comparison: Comparison) -> bool:
    return bool(energy_points(comparison))


def energy_figure(comparison: Comparison) -> Any:
    figure, (axes,) = canvas()
    for index, xs, ys in energy_points(comparison):
        axes.plot(xs, ys, "-", color=colour(index), marker="o", markersize=4, linewidth=1.8)
        best = best_per_joule(comparison.series[index])
        if best is not None and best.key[0] == "c":
            axes.plot([best.load], [best.throughputs[PER_JOULE]], linestyle="none", marker="o", markersize=11,
                      markerfacecolor="none", markeredgecolor=colour(index), markeredgewidth=2, zorder=5)  # fmt: skip
    concurrency_axis(axes)
    axes.set_ylim(0, max(axes.get_ylim()[1], 1e-3))
    style(axes, "Output tokens per joule" + time_note(comparison), "concurrency", "output tokens / J")
    shown = [index for index, _, _ in energy_points(comparison)]
    legend(figure, [(colour(i), "-", comparison.series[i].label) for i in shown]
           + [("#555555", "-", "ring: most tokens per joule")])
    return figure
