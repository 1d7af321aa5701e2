"""What every plot shares: matplotlib (the `report` extra), the figure sizes, one colour per
run, the axes' style, and the PNG bytes.

matplotlib's object API with the Agg canvas: no pyplot, no global state, no display.
Figures use the constrained layout, which makes room for titles, labels and a legend
placed outside the panels.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.errors import OrchError
from orchestrator.masking import mask
from orchestrator.report.comparison import Comparison

# Colour-blind-safe palette (Okabe-Ito), one colour per run.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
SIZE_IN = (7.0, 4.2)  # one panel: half the report's width
WIDE_IN = (14.0, 4.2)  # a row of panels: the report's whole width
DPI = 110
LineStyle = Literal["-", "--", ":", "-."]


@dataclass(frozen=True)
class Plot:
    name: str  # file stem, e.g. "throughput"
    title: str
    png: bytes
    wide: bool = False  # spans the report's width (a row of panels)


def _matplotlib() -> tuple[Any, Any]:
    try:
        # matplotlib (the report extra) only once a plot is drawn (start-up time)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        # never orch by name from the index: an unrelated project of that name is there
        raise OrchError(
            "plots need matplotlib, which is not installed",
            hint=f"{sys.executable} -m pip install 'matplotlib>=3.8' (orch's scripts/setup "
                 "installs it; from a checkout of orch: pip install -e '.[report]')",
        ) from None
    return Figure, FigureCanvasAgg


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def time_note(comparison: Comparison) -> str:
    return " (simulated runs in model time)" if comparison.model_time else ""


def canvas(panels: int = 1, *, wide: bool = False, sharey: bool = False) -> tuple[Any, list[Any]]:
    """A figure and its row of `panels` axes."""
    figure_class, canvas_class = _matplotlib()
    figure = figure_class(figsize=WIDE_IN if wide else SIZE_IN, dpi=DPI, layout="constrained")
    canvas_class(figure)
    axes = figure.subplots(1, panels, sharey=sharey, squeeze=False)[0]
    return figure, list(axes)


def plain(text: str) -> str:
    """Text for a plot, masked and shown as written: matplotlib reads a pair of `$` as
    mathtext (`$\\frac{a}{b}$` typeset, an unbalanced `$x` a parse error at draw time), and
    labels come from plan names, matrix values and run names. `\\$` is a literal `$` to
    matplotlib, and `\\` before anything else stays as it is, so escaping each `$` keeps
    every character."""
    return mask(text).replace("$", r"\$")


def style(axes: Any, title: str, xlabel: str, ylabel: str = "") -> None:
    axes.set_title(plain(title), fontsize=10.5)
    axes.set_xlabel(plain(xlabel))
    if ylabel:
        axes.set_ylabel(plain(ylabel))
    axes.grid(True, alpha=0.3)


def concurrency_axis(axes: Any) -> None:
    """Concurrency doubles from level to level: a log2 axis spaces the levels evenly."""
    axes.set_xscale("log", base=2)
    axes.xaxis.set_major_formatter("{x:g}")


def log_scale(axes: Any, which: Literal["x", "y"]) -> None:
    """A log scale, labelled in plain numbers at 1, 2 and 5 of each decade (no 10^x
    notation, no crowded minor labels)."""
    # matplotlib only once a plot is drawn (start-up time)
    from matplotlib.ticker import LogLocator, NullFormatter

    if which == "x":
        axes.set_xscale("log")
    else:
        axes.set_yscale("log")
    axis = axes.xaxis if which == "x" else axes.yaxis
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter("{x:,.6g}")
    axis.set_minor_formatter(NullFormatter())


def legend(figure: Any, entries: Sequence[tuple[str, LineStyle, str]]) -> None:
    """A legend under the panels, never over a line: (colour, line style, label) entries, in
    as many columns as fit the figure's width."""
    # matplotlib only once a plot is drawn (start-up time)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour_, linestyle=line, linewidth=2) for colour_, line, _ in entries]
    labels = [plain(label) for _, _, label in entries]
    room = int(figure.get_figwidth() * 14)  # characters across at font size 9, with handles
    widest = max((len(label) for label in labels), default=1) + 6
    columns = max(1, min(len(labels), room // widest))
    figure.legend(handles, labels, loc="outside lower center", ncols=columns, frameon=False, fontsize=9)


def run_legend(figure: Any, comparison: Comparison, styles: Sequence[tuple[LineStyle, str]] = ()) -> None:
    """A colour per run, then what each line style means (`--`: "P99")."""
    entries: list[tuple[str, LineStyle, str]] = [(colour(i), "-", s.label) for i, s in enumerate(comparison.series)]
    entries += [("#555555", line, text) for line, text in styles]
    legend(figure, entries)


def png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
