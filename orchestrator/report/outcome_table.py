"""How the requests of each level ended: failures by kind, finish reasons, and goodput
(`request_goodput`, requests per second meeting the SLOs) when any level has it."""

from __future__ import annotations

from orchestrator.report.comparison import Comparison
from orchestrator.report.figures import Point
from orchestrator.report.level_table import (
    HIGHER,
    MISSING,
    load_header,
    load_label,
    mark_best,
    req_s,
    with_ratio,
)
from orchestrator.tables import Column, TableData


def counts(counted: dict[str, int]) -> str:
    """`stop 120, length 8`: the most frequent first."""
    ordered = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{kind} {count}" for kind, count in ordered)


def failed_cell(point: Point) -> str:
    if not point.failed:
        return "0"
    kinds = counts(point.errors)
    said = f": {point.error_message[:80]}" if point.error_message else ""
    return f"{point.failed} ({kinds}{said})" if kinds else str(point.failed)


def outcome_table(comparison: Comparison) -> TableData:
    series = comparison.series
    with_goodput = any(p.request_goodput is not None for s in series for p in s.points)
    with_failures = any(p.failed for s in series for p in s.points)  # a column of zeros says less than a line
    groups = (["failed"] if with_failures else []) + ["finish reasons"] + (["goodput (req/s)"] if with_goodput else [])
    columns = [Column(load_header(comparison), "right")]
    columns += [Column(s.label, "left" if g == "finish reasons" else "right", g) for g in groups for s in series]
    caption = ("Failed: requests that ended in an error, by kind, with what the server said most "
               "often." if with_failures else "No request failed.")
    caption += " Finish reasons: of the successful requests (length: cut at max_tokens)."
    if with_goodput:
        caption += " Goodput: requests per second that met every latency objective (SLO) of the run."
    table = TableData("Requests by load", columns, caption=caption)
    base = comparison.baseline
    for key in comparison.loads:
        points = [s.point_at(key) for s in series]
        row = [load_label(key)]
        if with_failures:
            row += [failed_cell(p) if p else MISSING for p in points]
        row += [(counts(p.finish_reasons) or MISSING) if p else MISSING for p in points]
        if with_goodput:
            base_point = base.point_at(key)
            base_value = base_point.request_goodput if base_point else None
            values = [p.request_goodput if p else None for p in points]
            row += [with_ratio(v, base_value, req_s, is_base=i == 0) for i, v in enumerate(values)]
            mark_best(table, len(table.rows), values, len(row) - len(values), HIGHER)
        table.add(row)
    return table
