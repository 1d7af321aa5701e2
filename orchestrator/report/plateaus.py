"""Why each compared run plateaus, as each series read it from its run folder
(series.py: plateau_of): `plateau_table` and `plateau_lines` say it for `orch compare` and
the report: "kimi-nvfp4: interconnect-bound from C=64, TP8 over SYS links"."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.limits.verdicts import Plateau
from orchestrator.report.series import Series
from orchestrator.tables import Column, TableData, text


def _links(found: Plateau) -> str:
    verdict = found.verdict
    links = verdict.figures.get("tp_links") if verdict is not None else None
    return f", {links}" if isinstance(links, str) else ""


def plateau_lines(series: Sequence[Series]) -> list[str]:
    """One line per run: where it plateaus and why, then what changed between them."""
    lines = [f"{s.label}: {s.plateau.says}{_links(s.plateau)}" for s in series]
    names = {s.plateau.verdict.name for s in series if s.plateau.verdict is not None}
    if len(series) > 1 and len(names) > 1:
        lines.append("The limiter differs between runs: a plan change moved the bottleneck.")
    return lines


def plateau_table(series: Sequence[Series]) -> TableData:
    table = TableData(
        "Why it plateaus",
        [Column("Run"), Column("Plateau", prose=True), Column("Evidence", prose=True, priority=1),
         Column("Try", prose=True, priority=2)],
        caption="The limiter at the knee (or at the highest level while throughput still rises), "
                "from the level's figures; docs/bench.md lists the rules.",
    )
    for s in series:
        first = s.plateau.suggestions[0].title if s.plateau.suggestions else s.plateau.note or "-"
        table.add([s.label, s.plateau.says + _links(s.plateau), s.plateau.evidence() or "-", first])
    return table


def plateau_html(series: Sequence[Series]) -> str:
    """The report's words under the summary tables: each run's plateau, and each suggestion as
    the `matrix:` block to paste into its plan."""
    out = [f"<p>{text(line)}</p>" for line in plateau_lines(series)]
    for s in series:
        for suggestion in s.plateau.suggestions:
            out.append(f"<p>{text(f'{s.label}: try {suggestion.title}')}</p>"
                       f"<pre>{text(suggestion.as_yaml())}</pre>")
    return "".join(out)
