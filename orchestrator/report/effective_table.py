"""The load each level asked for against the load the server ran (the level's
`effective_concurrency`, orchestrator/bench/anomalies.py): the concurrency asked, the most
requests the client held in flight, and the server's running and waiting gauges at their
peak. A capped level (the server never ran them all at once: `--max-num-seqs`, the KV cache,
a slow client) measured that lower load; the table says so with the figure reached."""

from __future__ import annotations

from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import MISSING
from orchestrator.tables import Column, TableData


def _count(value: float | int | None) -> str:
    return MISSING if value is None else f"{value:g}"


def effective_table(comparison: Comparison) -> TableData | None:
    """One row per level of each run that the server's gauges saw; None without any."""
    rows = [(s, p) for s in comparison.series for p in s.points if p.effective_concurrency]
    if not rows:
        return None
    table = TableData(
        "Load asked against load run",
        [Column("Run"), Column("Level", "right"), Column("Asked (C)", "right"),
         Column("Client in flight", "right"), Column("Max running", "right"), Column("Max waiting", "right"),
         Column("Scrapes", "right", priority=1), Column("Capped", prose=True)],
        caption="Client in flight: the most requests the benchmark held at once. Max running and waiting: "
        "the server's own gauges (vllm:num_requests_running, vllm:num_requests_waiting) at their peak over "
        "the level's scrapes. Capped: the server never ran the concurrency asked for (3 scrapes or more).",
    )  # fmt: skip
    for s, p in rows:
        seen = p.effective_concurrency or {}
        row = [s.label, p.level, _count(seen.get("asked")), _count(seen.get("client_in_flight")),
               _count(seen.get("max_running")), _count(seen.get("max_waiting")), _count(seen.get("scrapes")),
               p.capped or "no"]  # fmt: skip
        if p.capped:
            table.strong.add((len(table.rows), len(row) - 1))
        table.add(row)
    return table
