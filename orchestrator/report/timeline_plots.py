"""Each run through its knee level (knee_timeline.py), against time from the level's start:
KV-cache usage, running requests (the level's concurrency dotted: a batch below it is a
capped level), waiting requests, and the GPUs' power where the level sampled them; one
colour per run."""

from __future__ import annotations

from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.knee_timeline import KneeTimeline, knee_timelines
from orchestrator.report.plot_canvas import canvas, colour, legend, style, time_note

SERVER_PANELS = (
    ("kv_cache_usage", "KV-cache usage", "% of the KV cache", 100.0),
    ("running", "Running requests", "requests", 1.0),
    ("waiting", "Waiting requests", "requests", 1.0),
)


def timeline_figure(comparison: Comparison, timelines: list[KneeTimeline] | None = None) -> Any:
    shown = knee_timelines(comparison) if timelines is None else timelines
    power = any(t.power_w for t in shown)
    figure, panels = canvas(len(SERVER_PANELS) + (1 if power else 0), wide=True)
    from matplotlib.ticker import MaxNLocator  # after canvas(): it says when matplotlib is missing

    unit = "s, model time" if comparison.model_time else "s"
    for t in shown:
        line = {"color": colour(t.run), "marker": "o", "markersize": 2.5, "linewidth": 1.5}
        for (gauge, _, _, factor), axes in zip(SERVER_PANELS, panels, strict=False):
            pairs = t.server.get(gauge, [])
            if pairs:
                axes.plot([x for x, _ in pairs], [y * factor for _, y in pairs], "-", **line)
            if gauge == "running":
                axes.axhline(t.asked, color=colour(t.run), linestyle=":", linewidth=1.2)
        if power and t.power_w:
            panels[-1].plot([x for x, _ in t.power_w], [y for _, y in t.power_w], "-", **line)
    for (_, title, ylabel, _), axes in zip(SERVER_PANELS, panels, strict=False):
        style(axes, title, f"time in the level ({unit})", ylabel)
    if power:
        style(panels[-1], "GPU power (all GPUs)", f"time in the level ({unit})", "W")
    for axes in panels:
        axes.set_xlim(left=0)
        axes.set_ylim(0, max(axes.get_ylim()[1], 1.0))
    for axes in panels[1:3]:
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    figure.suptitle("Through each run's knee level (or highest)" + time_note(comparison), fontsize=11.5)
    legend(figure, [(colour(t.run), "-", t.title) for t in shown]
           + [("#555555", ":", "concurrency asked")])
    return figure
