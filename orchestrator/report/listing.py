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
from orchestrator.report.compare_tables import MISSING, tok_s
from orchestrator.report.run_data import load_run
from orchestrator.report.series import build_series
from orchestrator.report.tabular import Column, TableData
from orchestrator.rundir import list_runs


@dataclass(frozen=True)
class RunRow:
    path: Path
    plan: str
    started: str
    hosts: str
    status: str
    engine: str
    single_stream: str
    peak: str
    problem: str | None = None


def _started(text: object) -> str:
    """'2026-03-01T12:00:05+00:00' -> '2026-03-01 12:00' (UTC, as written by the run folder)."""
    value = str(text or "")
    return value.replace("T", " ")[:16]


def run_row(path: Path) -> RunRow:
    try:
        run = load_run(path)
    except RunFolderError as error:
        return RunRow(path, path.parent.name, "", "", "unreadable", MISSING, MISSING, MISSING, str(error))
    engine = run.engine or "unknown"
    single = peak = MISSING
    series = build_series([run])
    if series:
        first = series[0]
        if first.simulated:
            engine = f"{engine} (simulated)"
        one, top = first.single_stream, first.peak
        single = tok_s(one.throughput) if one else MISSING
        if top:
            at = f"C={top.load:g}" if top.key[0] == "c" else f"{top.load:g} req/s"
            peak = f"{tok_s(top.throughput)} at {at}"
    elif run.simulated:
        engine = f"{engine} (simulated)"
    hosts = ", ".join(h.name for h in run.hosts) or MISSING
    return RunRow(path, run.name, _started(run.meta.get("started")), hosts, run.status, engine, single, peak, run.plan_problem)


def list_rows(root: Path, plans: Sequence[str] = ()) -> list[RunRow]:
    """Every run folder under `root` (only those of `plans` when given), oldest first."""
    folders = [p for p in list_runs(root) if not plans or p.parent.name in plans]
    return [run_row(path) for path in folders]


def runs_table(rows: Sequence[RunRow], root: Path) -> TableData:
    table = TableData(
        f"Runs under {root}",
        [
            Column("Plan"),
            Column("Run"),
            Column("Started (UTC)"),
            Column("Hosts"),
            Column("Status"),
            Column("Engine"),
            Column("Single stream (tok/s)", "right"),
            Column("Peak (tok/s)", "right"),
        ],
        caption="Throughput: output tokens per second of the first benchmarked host; "
        "simulated runs in model time (the simulator's time scale taken out).",
    )
    for row in rows:
        table.add([row.plan, row.path.name, row.started, row.hosts, row.status, row.engine, row.single_stream, row.peak])
    return table
