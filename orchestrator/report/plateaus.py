"""Why each compared run plateaus (limits/verdicts.py), read back from its run folder: the
plan's `service.args` and the host's facts (topology, GPU count) as the apply saw them, the
level files' verdicts (judged on reading when a level file predates them), the knee as the
comparison found it. `plateau_table` and `plateau_lines` say it for `orch compare` and the
report: "kimi-nvfp4: interconnect-bound from C=64, TP8 over SYS links"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.engines import engine
from orchestrator.limits.evidence import PlanFacts
from orchestrator.limits.verdicts import Plateau, plan_facts, plateau
from orchestrator.runs.reader import HostData, RunData
from orchestrator.tables import Column, TableData, text

if TYPE_CHECKING:
    from orchestrator.report.series import Series


def plateau_of(run: RunData, host: HostData, knee: tuple[int | None, str], threshold: float) -> Plateau:
    assert host.bench is not None
    service = run.plan.service if run.plan is not None else None
    args: dict[str, Any] = dict(service.args) if service is not None else {}
    extra = tuple(service.extra_args) if service is not None else ()
    facts = host.facts or {}
    gpus = facts.get("gpus")
    topology = facts.get("topology")
    count = len(gpus) if isinstance(gpus, list) else None
    # no plan: no engine whose flags to name (the advice says so), never vLLM's by default
    found = plan_facts(args, extra, topology if isinstance(topology, str) else None, count,
                       flags=engine(service.engine).flags) if service is not None else PlanFacts(gpus=count)
    return plateau(host.bench.levels, args, extra, found, threshold, known=knee)


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
