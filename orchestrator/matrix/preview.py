"""`orch plan` of a plan with a matrix: the variants in the order apply runs them, what each
changes against the first (the server's flags and environment as a restart shows them, the
pins, the rest of the plan), what reaching it takes (another install, a restart, or the same
server), and an estimate of the time from the start-ups and sweeps of earlier runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import OrchError
from orchestrator.matrix.expand import MatrixPlan, Variant, run_order, transition
from orchestrator.plan.models import Plan
from orchestrator.report.plan_diff import UNSET, diff_plans
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import plan_runs, read_meta, read_record
from orchestrator.runs.run_records import HostSteps
from orchestrator.service.launch import render_launch
from orchestrator.service.spec_diff import argv_changes, duration, env_changes
from orchestrator.tables import Column, TableData

TAKES = {
    "first": "start (first)",
    "install": "install + restart",
    "restart": "restart",
    "reuse": "same server",
}


def changes(before: Plan, after: Plan) -> list[str]:
    """What `after` changes against `before`: the launch as a restart shows it
    (`~ --max-num-seqs: 64 -> 128`), then the pins and the rest of the plan."""
    lines: list[str] = []
    if before.service and after.service and before.python and after.python:
        try:
            a = render_launch(before, venv_bin=f"{before.python.venv}/bin")
            b = render_launch(after, venv_bin=f"{after.python.venv}/bin")
        except OrchError:
            pass
        else:
            lines += argv_changes(a.argv, b.argv)
            lines += env_changes(a.public_env(), b.public_env(),
                                 a.secret_env_names | b.secret_env_names)
    for change in diff_plans(before, after):
        shown_in_launch = change.setting.startswith("--") or change.category in ("env", "model") \
            or change.setting.startswith("service.") or change.category == "parallelism" \
            or change.setting.startswith("weights")
        if shown_in_launch and lines:
            continue
        if change.category == "pins":
            lines.append(f"~ pin {change.setting}: {change.before or UNSET} -> "
                         f"{change.after or UNSET}")
        else:
            lines.append(f"~ {change.setting}: {change.before or UNSET} -> {change.after or UNSET}")
    return lines


@dataclass
class History:
    """What earlier runs of the plan took (seconds; medians over the runs that had it)."""

    runs: int = 0
    startup: float | None = None
    install: float | None = None
    other: float | None = None  # converge, smoke, collect: the rest of a run
    bench: float | None = None
    bench_by_digest: dict[str, float] = field(default_factory=dict)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def history(root: Path, plan_name: str) -> History:
    """The start-ups, sweeps and installs recorded by the plan's earlier runs."""
    found = History()
    startups: list[float] = []
    installs: list[float] = []
    benches: list[float] = []
    others: list[float] = []
    for run in plan_runs(root, plan_name):
        try:
            meta = read_meta(run)
            if not meta.hosts:
                continue
            steps_file = RunLayout(run).host(meta.hosts[0]).steps
            if not steps_file.exists():
                continue
            steps = read_record(steps_file, HostSteps)
        except OrchError:
            continue
        found.runs += 1
        by_name = {s.step: s for s in steps.steps}
        startup = by_name.get("ready")
        if startup is not None and startup.status == "ok" and steps.startup_s:
            startups.append(startup.seconds)
        python = by_name.get("python")
        if python is not None and python.status == "changed":
            installs.append(python.seconds)
        bench = by_name.get("bench")
        if bench is not None and bench.status == "ok":
            benches.append(bench.seconds)
            found.bench_by_digest[meta.plan_digest] = bench.seconds
        if meta.status == "complete" and meta.duration_s:
            spent = sum(s.seconds for s in steps.steps
                        if s.step in ("ready", "bench") or (s.step == "python"
                                                             and s.status == "changed"))
            others.append(max(0.0, meta.duration_s - spent))
    found.startup, found.install = _median(startups), _median(installs)
    found.bench, found.other = _median(benches), _median(others)
    return found


def estimate(variant: Variant, takes: str, past: History) -> float | None:
    """Seconds the variant's run should take, or None when no earlier run says."""
    bench = past.bench_by_digest.get(variant.loaded.digest, past.bench)
    if past.runs == 0 or bench is None:
        return None
    total = bench + (past.other or 0.0)
    if takes in ("first", "install", "restart"):
        total += past.startup or 0.0
    if takes == "install":
        total += past.install or 0.0
    return total


def listing(matrix: MatrixPlan, root: Path) -> tuple[TableData, list[str]]:
    """The variants' table and the lines said under it (counts, estimate)."""
    order = run_order(matrix.variants)
    first = matrix.variants[0]
    past = history(root, matrix.name)
    table = TableData(
        f"Matrix {matrix.name}: {len(order)} variants, in the order apply runs them",
        [Column("#", "right"), Column("Variant"), Column("Takes"),
         Column(f"Changes against variant {first.index}", prose=True),
         Column("Estimate", "right", priority=1)],
    )
    total = 0.0
    known = True
    previous: Plan | None = None
    takes_count: dict[str, int] = {}
    for variant in order:
        takes = transition(previous, variant.plan)
        takes_count[takes] = takes_count.get(takes, 0) + 1
        previous = variant.plan
        lines = changes(first.plan, variant.plan) if variant is not first else []
        guess = estimate(variant, takes, past)
        if guess is None:
            known = False
        else:
            total += guess
        table.add([str(variant.index), matrix.label(variant), TAKES[takes],
                   "\n".join(lines) if lines else ("(the first)" if variant is first
                                                    else "(nothing)"),
                   duration(guess) if guess is not None else "-"])
    installs = takes_count.get("install", 0)
    restarts = takes_count.get("restart", 0)
    said = [f"{installs} need{'s' if installs == 1 else ''} an install change, {restarts} only a "
            f"restart, {takes_count.get('reuse', 0)} reuse the server before them "
            f"(the first starts it)."]
    if past.runs == 0:
        said.append(f"estimate: no earlier run of {matrix.name} under {root}/ to take the "
                    "start-up and sweep times from")
    else:
        parts = [f"start-up {duration(past.startup)}" if past.startup else None,
                 f"sweep {duration(past.bench)}" if past.bench else None]
        basis = ", ".join(p for p in parts if p)
        prefix = "about" if known else "at least"
        said.append(f"estimate: {prefix} {duration(total)} in all, from {past.runs} earlier "
                    f"run{'s' if past.runs != 1 else ''} of {matrix.name} ({basis})")
    if matrix.objective is not None:
        said.append(f"objective: {matrix.objective.text} (orch compare names the best variant)")
    return table, said
