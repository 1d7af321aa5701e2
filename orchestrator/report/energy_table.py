"""What the GPUs drew for the tokens: `orch compare`'s energy table (runs whose hosts had GPU
telemetry; none, and no table, otherwise)."""

from __future__ import annotations

from orchestrator.report.comparison import Comparison
from orchestrator.report.figures import Point
from orchestrator.report.level_table import HIGHER, per_level
from orchestrator.report.series import Series
from orchestrator.tables import TableData

PER_JOULE = "output_tokens_per_joule"
PER_WATT = "output_tokens_per_s_per_w"


def best_per_joule(series: Series) -> Point | None:
    """The run's level that made the most output tokens per joule."""
    measured = [p for p in series.points if p.throughputs.get(PER_JOULE) is not None]
    return max(measured, key=lambda p: p.throughputs[PER_JOULE], default=None)


def energy_table(comparison: Comparison) -> TableData | None:
    """Tokens per joule and per second per watt by load, or None when no run measured them."""
    if not any(best_per_joule(s) for s in comparison.series):
        return None
    best = ", ".join(f"{s.label} {p.throughputs[PER_JOULE]:,.3f} tok/J at {p.level}"
                     for s in comparison.series if (p := best_per_joule(s)) is not None)
    return per_level(
        comparison,
        "Energy by load",
        [("tok/J", lambda s, p: p.throughputs.get(PER_JOULE), _joules, HIGHER),
         ("tok/s per W", lambda s, p: p.throughputs.get(PER_WATT), _joules, HIGHER)],
        caption="Output tokens per joule the GPUs drew during the level (nvidia-smi power, "
                f"integrated over the level; tok/s per W is the same over its mean power). "
                f"Best: {best}.",
    )


def _joules(value: float) -> str:
    return f"{value:,.3f}"
