"""The per-request CDFs of a comparison: TTFT (log scale, for the queueing tail) and
end-to-end latency, one line per run at the level distributions.py chose for it."""

from __future__ import annotations

from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.distributions import cdf
from orchestrator.report.plot_canvas import canvas, colour, legend, log_scale, style, time_note

QUANTILES = (0.5, 0.9, 0.99)  # reference lines: where the CDF meets P50, P90, P99


def distribution_figure(comparison: Comparison) -> Any:
    figure, (ttft, latency) = canvas(2, wide=True)
    index_of = {s.label: i for i, s in enumerate(comparison.series)}
    for d in comparison.distributions:
        line = {"color": colour(index_of.get(d.label, 0)), "linewidth": 1.8, "where": "post"}
        positive = [v for v in d.ttft_ms if v > 0]  # a zero has no place on a log axis
        for axes, values in ((ttft, positive), (latency, [v / 1000 for v in d.e2el_ms])):
            if values:
                xs, ys = cdf(values)
                axes.step([xs[0], *xs], [0.0, *ys], **line)  # from 0: the curve rises at the first request
    log_scale(ttft, "x")
    for axes in (ttft, latency):
        axes.set_ylim(0, 1.02)
        axes.set_yticks([0, 0.25, *QUANTILES, 1], ["0", "25%", "50%", "90%", "", "100%"])
        for q in QUANTILES:
            axes.axhline(q, color="#999999", linewidth=0.8, linestyle=":")
            axes.annotate(f"P{q * 100:g}", (1, q), xycoords=("axes fraction", "data"), xytext=(3, 0),
                          textcoords="offset points", va="center", fontsize=8, color="#666666")  # fmt: skip
    style(ttft, "Time to first token", "TTFT (ms, log scale)", "fraction of requests at or below")
    style(latency, "End-to-end latency", "latency (s)")
    legend(figure, [(colour(index_of.get(d.label, 0)), "-", d.title) for d in comparison.distributions])
    figure.suptitle("Per-request distributions at each run's knee (or highest level)" + time_note(comparison),
                    fontsize=11.5)  # fmt: skip
    return figure
