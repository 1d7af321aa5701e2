"""What every comparison table shares: cell formats, ratios to the baseline, the best run
of a row, and the per-load-level table builder (one row per load, one column per run in
each group of figures)."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.report.comparison import Comparison
from orchestrator.report.figures import LoadKey, Point, ratio
from orchestrator.report.series import Series
from orchestrator.tables import Column, TableData

Fmt = Callable[[float], str]
Getter = Callable[[Series, Point], float | None]
MISSING = "-"
HIGHER, LOWER = True, False  # which way is better: marks the best run of each row


def tok_s(value: float) -> str:
    return f"{value:,.1f}"


def seconds(ms: float) -> str:
    return f"{ms / 1000:,.2f}"


def millis(ms: float) -> str:
    return f"{ms:,.1f}"


def req_s(value: float) -> str:
    return f"{value:,.2f}"


def with_ratio(value: float | None, base: float | None, fmt: Fmt, *, is_base: bool) -> str:
    if value is None:
        return MISSING
    shown = fmt(value)
    factor = ratio(value, base)
    if is_base or factor is None:
        return shown
    return f"{shown} ({factor:.2f}x)"


def load_label(key: LoadKey) -> str:
    kind, load = key
    return f"{load:g} req/s" if kind == "r" else f"{load:g}"


def at(key: LoadKey) -> str:
    """`C=8`, or `2.5 req/s` for a rate level."""
    return f"C={key[1]:g}" if key[0] == "c" else load_label(key)


def load_header(comparison: Comparison) -> str:
    return "Load" if any(kind == "r" for kind, _ in comparison.loads) else "Concurrency"


def mark_best(table: TableData, row: int, values: list[float | None], first_column: int, higher: bool) -> None:
    present = [(v, i) for i, v in enumerate(values) if v is not None]
    if len(present) < 2:
        return
    best = max(present)[0] if higher else min(present)[0]
    table.strong |= {(row, first_column + i) for v, i in present if v == best}


def per_level(
    comparison: Comparison, title: str, groups: list[tuple[str, Getter, Fmt, bool]], *, caption: str = ""
) -> TableData:
    """One row per load level; per group, one column per run with its ratio to the baseline;
    a `*` after a flagged level's figure."""
    columns = [Column(load_header(comparison), "right")]
    for group, _, _, _ in groups:
        columns += [Column(s.label, "right", group) for s in comparison.series]
    table = TableData(title, columns, caption=caption)
    base = comparison.baseline
    for key in comparison.loads:
        row = [load_label(key)]
        base_point = base.point_at(key)
        for _, get, fmt, higher in groups:
            base_value = get(base, base_point) if base_point else None
            values: list[float | None] = []
            for index, s in enumerate(comparison.series):
                point = s.point_at(key)
                value = get(s, point) if point else None
                values.append(value)
                cell = with_ratio(value, base_value, fmt, is_base=index == 0)
                if point is not None and point.flags and cell != MISSING:
                    cell += " *"
                row.append(cell)
            mark_best(table, len(table.rows), values, len(row) - len(values), higher)
        table.add(row)
    return table
