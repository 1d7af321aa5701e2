"""`orch runs`: one row per run folder with its plan, time, hosts, status, engine and
headline figures (single stream and peak output throughput, model time when simulated).

A folder that cannot be read is listed as `unreadable` with the reason, never skipped
silently and never fatal to the listing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import RunFolderError
from orchestrator.report.level_table import MISSING, tok_s
from orchestrator.report.series import build_series
from orchestrator.runs.reader import folders_without_meta, list_runs, load_run
from orchestrator.tables import Column, TableData

NO_META = ("no meta.json: the run was cut before its first record, or its folder was "
           "edited by hand; orch cannot read it as a run")


@dataclass(frozen=True)
class RunRow:
    path: Path
    plan: str
    hosts: list[str]
    status: str
    engine: str  # the engine; "simulated" for the simulator
    single_stream: float | None = None  # output tok/s at concurrency 1
    peak: float | None = None  # output tok/s at the best level
    peak_at: str | None = None  # that level: "C=64" or "8 req/s"
    problem: str | None = None

    def to_json(self) -> dict[str, object]:
        """`orch runs --json`: figures as numbers, the folder as given on the command line."""
        return {"path": str(self.path), "run": self.path.name, "plan": self.plan,
                "status": self.status, "engine": self.engine, "hosts": self.hosts,
                "single_stream_tok_s": self.single_stream, "peak_tok_s": self.peak,
                "peak_at": self.peak_at, "problem": self.problem}


def _engine(engine: str | None, simulated: bool) -> str:
    """`vllm` (real), `sim` (the simulator), or `<engine>, simulated` for a real engine's plan
    whose results came from a simulator."""
    name = engine or "unknown"
    return f"{name}, simulated" if simulated and name != "sim" else name


def run_row(path: Path) -> RunRow:
    try:
        run = load_run(path)
    except RunFolderError as error:
        return RunRow(path, path.parent.name, [], "unreadable", MISSING, problem=str(error))
    single = peak = None
    at = None
    simulated = run.simulated
    series = build_series([run])
    if series:
        first = series[0]
        simulated = first.simulated
        one, top = first.single_stream, first.peak
        single = one.output_throughput if one else None
        if top:
            peak = top.output_throughput
            at = f"C={top.load:g}" if top.key[0] == "c" else f"{top.load:g} req/s"
    engine = _engine(run.engine, simulated)
    return RunRow(path, run.name, [h.name for h in run.hosts], run.status, engine, single, peak,
                  at, run.plan_problem)


def list_rows(root: Path, plans: Sequence[str] = ()) -> list[RunRow]:
    """Every run folder under `root` (only those of `plans` when given), oldest first."""
    def wanted(path: Path) -> bool:
        return not plans or path.parent.name in plans

    rows = [run_row(path) for path in list_runs(root) if wanted(path)]
    rows += [RunRow(path, path.parent.name, [], "unreadable", MISSING, problem=NO_META)
             for path in folders_without_meta(root) if wanted(path)]
    return sorted(rows, key=lambda row: (row.path.name, row.path.parent.name))  # list_runs'


def runs_table(rows: Sequence[RunRow], root: Path) -> TableData:
    table = TableData(
        f"Runs under {root}",
        [
            Column("Plan"),
            Column("Run"),
            Column("Status"),
            Column("Engine", priority=2),
            Column("1 stream", "right", priority=1),
            Column("Peak", "right", priority=1),
            Column("Hosts", priority=2),
        ],
        compact=True,
        caption="Run: the folder, named by UTC start time and plan digest. "
        "1 stream, Peak: output tok/s of the first benchmarked host at concurrency 1 and "
        "at its best level. Engine sim: the simulator (figures in model time).",
    )
    unfinished = False
    for row in rows:
        peak = f"{tok_s(row.peak)} at {row.peak_at}" if row.peak is not None else MISSING
        single = tok_s(row.single_stream) if row.single_stream is not None else MISSING
        status = row.status
        if status in ("interrupted", "failed", "incomplete"):
            status += " (resumable)"
            unfinished = True
        table.add([row.plan, row.path.name, status, row.engine, single, peak,
                   ", ".join(row.hosts) or MISSING])
    if unfinished:
        table.caption += (" Resumable: `orch apply PLAN --resume RUN_FOLDER` finishes the run "
                          "in its folder (finished benchmark levels kept; `--resume` alone "
                          "takes the plan's latest unfinished run).")
    return table
