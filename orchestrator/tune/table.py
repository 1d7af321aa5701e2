"""The tune's table and the winner's reason (pure): each trial, what it changed against the
plan, its measured objective and peak against the predicted peak, the SLO met or what missed
it, the limiter at its plateau, the host that ran it; then the best trial meeting the SLO,
with the gain as a ratio and the limiter before and after."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.matrix.expand import short, shown_value
from orchestrator.tables import Column, TableData
from orchestrator.tune.tune_file import TrialEntry, TuneRecord


def label(values: dict[str, Any]) -> str:
    """`max-num-seqs=64 profile=kimi-int4`; `(the plan)` when nothing changed."""
    keys = list(values)
    return " ".join(f"{short(k, keys)}={shown_value(v)}" for k, v in values.items()) or "(the plan)"


def _tok(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def slo_cell(entry: TrialEntry) -> str:
    if entry.status != "complete":
        return "-"
    if entry.slo_met:
        return "met"
    missed = [f"{name} {_ms(f.get('value_ms'))}" for name, f in entry.slo.items() if not f.get("met")]
    return "missed: " + ", ".join(missed) if missed else "missed"


def _ms(value: Any) -> str:
    if not isinstance(value, int | float):
        return "n/a"
    return f"{value / 1000:.2f}s" if value >= 1000 else f"{value:.0f}ms"


def _status(entry: TrialEntry) -> str:
    if entry.status in ("failed", "skipped"):
        text = entry.cause or entry.status
        return text if text.startswith("skipped") else f"{entry.status}: {text}"
    return entry.status


def table(record: TuneRecord, winner: TrialEntry | None) -> TableData:
    data = TableData(
        f"Tune {record.plan}: {record.objective} meeting {record.slo}",
        [Column("#", "right"), Column("What changed"), Column("Measured", "right"),
         Column("Peak", "right", priority=2), Column("Predicted", "right", priority=1),
         Column("SLO"), Column("Limiter", prose=True, priority=1), Column("Host", priority=2),
         Column("Status", prose=True)])
    for entry in record.trials:
        forecast = entry.predicted or {}
        # a deployment predicted not to fit has no curve: its peak is no figure to show
        predicted = forecast.get("peak_output_throughput") if forecast.get("fits", True) else None
        mark = " *" if winner is not None and entry.number == winner.number else ""
        data.add([f"{entry.number}{mark}", f"{label(entry.changed)} ({entry.source})",
                  _tok(entry.objective), _tok(entry.peak),
                  _tok(predicted) if isinstance(predicted, int | float) else "-",
                  slo_cell(entry), entry.limiter or "-", entry.host or "-", _status(entry)])
    return data


@dataclass(frozen=True)
class Winner:
    entry: TrialEntry
    reason: str


def winner(record: TuneRecord) -> Winner | None:
    """The trial with the highest objective meeting the SLO, and why it wins."""
    met = [t for t in record.trials if t.status == "complete" and t.slo_met and t.objective]
    if not met:
        return None
    top = max(met, key=lambda t: (t.objective or 0.0, -t.number))
    base = next((t for t in record.trials if t.source == "baseline"), None)
    if base is None or top.number == base.number:
        return Winner(top, f"the plan as written: {_tok(top.objective)} {record.objective} at "
                           f"C={top.at:g}; no trial beat it" if top.at else "the plan as written")
    before = base.limiter or "no limiter named"
    after = top.limiter or "no limiter named"
    if base.objective:
        ratio = f"{(top.objective or 0.0) / base.objective:.2f}".rstrip("0").rstrip(".")
        gain = f"{ratio}x ({_tok(top.objective)} against {_tok(base.objective)} {record.objective})"
    else:
        gain = (f"{_tok(top.objective)} {record.objective}, where the plan met the SLO at no "
                "level" if base.status == "complete" else
                f"{_tok(top.objective)} {record.objective}, where the plan {base.status}")
    return Winner(top, f"{label(top.changed)}: {gain}; {before} before, now {after}")
