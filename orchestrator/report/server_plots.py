"""The server's view per level (server_load.py) against concurrency: KV-cache usage,
running and waiting requests (mean over the level solid, peak dashed) and preemptions
during the level; one colour per run."""

from __future__ import annotations

from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.plot_canvas import canvas, colour, concurrency_axis, run_legend, style
from orchestrator.report.server_load import server_levels

GAUGE_PANELS = (
    ("kv_cache_usage", "KV-cache usage", "% of the KV cache", 100.0),
    ("running", "Running requests", "requests", 1.0),
    ("waiting", "Waiting requests", "requests", 1.0),
)


def server_figure(comparison: Comparison) -> Any:
    figure, panels = canvas(len(GAUGE_PANELS) + 1, wide=True)
    from matplotlib.ticker import MaxNLocator  # after canvas(): it says when matplotlib is missing

    for index, s in enumerate(comparison.series):
        levels = server_levels(s)
        line = {"color": colour(index), "marker": "o", "markersize": 3.5, "linewidth": 1.6}
        for (gauge, _, _, factor), axes in zip(GAUGE_PANELS, panels, strict=False):
            for dashes, blocks in (("-", [v.mean for v in levels]), ("--", [v.peak for v in levels])):
                pairs = [(v.concurrency, b[gauge] * factor) for v, b in zip(levels, blocks, strict=True) if gauge in b]
                if pairs:
                    xs, ys = zip(*pairs, strict=True)
                    axes.plot(xs, ys, dashes, **line)
        pairs = [(v.concurrency, v.preemptions) for v in levels if v.preemptions is not None]
        if pairs:
            xs, ys = zip(*pairs, strict=True)
            panels[-1].plot(xs, ys, "-", **line)
    for (_, title, ylabel, _), axes in zip(GAUGE_PANELS, panels, strict=False):
        style(axes, title, "concurrency", ylabel)
    style(panels[-1], "Preemptions during the level", "concurrency", "preemptions")
    for axes in panels:
        concurrency_axis(axes)
        axes.set_ylim(0, max(axes.get_ylim()[1], 1.0))
    for axes in panels[1:]:
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))  # requests and preemptions are counts
    figure.suptitle("The server's view per level (vLLM /metrics)", fontsize=11.5)
    run_legend(figure, comparison, [("-", "mean over the level"), ("--", "peak")])
    return figure
