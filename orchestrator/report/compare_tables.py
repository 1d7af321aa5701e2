"""The tables of a comparison, as data (`TableData`): runs, headline figures, throughput,
latency, TTFT and ITL per load level, and latency at equal load.

Every figure of a run other than the first carries its ratio to the first (the baseline),
e.g. `2,276.0 (1.84x)`; the best run of each row is in bold. A `*` marks a level with
flags (see the warnings).
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.report.comparison import Comparison
from orchestrator.report.figures import LoadKey, Point, at_throughput, ratio
from orchestrator.report.series import Series
from orchestrator.report.tabular import Column, TableData

Fmt = Callable[[float], str]
MISSING = "-"


def tok_s(value: float) -> str:
    return f"{value:,.1f}"


def seconds(ms: float) -> str:
    return f"{ms / 1000:,.2f}"


def millis(ms: float) -> str:
    return f"{ms:,.1f}"


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


def _at(key: LoadKey) -> str:
    return f"C={key[1]:g}" if key[0] == "c" else load_label(key)


def _load_header(comparison: Comparison) -> str:
    return "Load" if any(kind == "r" for kind, _ in comparison.loads) else "Concurrency"


def captions(comparison: Comparison) -> str:
    """What the figures mean: printed once under the tables (and atop the report)."""
    lines = [
        "Throughput: output tokens (reasoning and content) / level wall time. "
        "Latency: request start to the end of the response; failed requests left out."
    ]
    if len(comparison.series) > 1:
        lines.append(
            f"Ratios: against {comparison.baseline.label} (the baseline, given first); "
            "bold: the best run of the row."
        )
    scales: dict[str, list[str]] = {}
    for s in comparison.model_time:
        scales.setdefault(f"{s.time_scale:g}" if s.time_scale else "?", []).append(s.label)
    for scale, labels in scales.items():
        lines.append(
            f"Simulated at time scale {scale}: {', '.join(labels)}. Figures in model time "
            f"(durations / {scale}, throughputs x {scale}); raw figures in the run folders."
        )
    if any(p.flags for s in comparison.series for p in s.points):
        lines.append("*: a flagged level (see the warnings).")
    return "\n".join(lines)


def overview_table(comparison: Comparison) -> TableData:
    table = TableData(
        "Runs",
        [Column("Run"), Column("Folder", priority=2, prose=True), Column("Engine", priority=1),
         Column("Model", priority=1), Column("GPUs", priority=1), Column("Status")],
    )
    for s in comparison.series:
        engine = s.engine
        if s.simulated:
            scale = f", time scale {s.time_scale:g}" if s.time_scale else ""
            engine = f"{engine} (simulated{scale})"
        table.add([s.label, str(s.run.path), engine, s.model or MISSING, s.gpus.describe(), s.run.status])
    return table


def headline_table(comparison: Comparison) -> TableData:
    base = comparison.baseline
    table = TableData(
        "Headline",
        [
            Column("Run"),
            Column("Single stream (tok/s)", "right"),
            Column("Peak (tok/s)", "right"),
            Column("Peak at", priority=2),
            Column("Peak per GPU (tok/s)", "right", priority=1),
            Column("Knee", prose=True),
        ],
        caption="Single stream: concurrency 1. Knee: smallest concurrency where doubling gains "
        "less than the threshold (5% unless the plan says otherwise).",
    )
    base_single = base.single_stream.throughput if base.single_stream else None
    base_peak = base.peak.throughput if base.peak else None
    for index, s in enumerate(comparison.series):
        single = s.single_stream.throughput if s.single_stream else None
        top = s.peak
        first = index == 0
        table.add(
            [
                s.label,
                with_ratio(single, base_single, tok_s, is_base=first),
                with_ratio(top.throughput if top else None, base_peak, tok_s, is_base=first),
                _at(top.key) if top else MISSING,
                with_ratio(
                    s.per_gpu(top.throughput if top else None), base.per_gpu(base_peak), tok_s, is_base=first
                ),
                f"C={s.knee}" if s.knee is not None else s.knee_how,
            ]
        )
    return table


Getter = Callable[[Series, Point], float | None]
HIGHER, LOWER = True, False  # which way is better: marks the best run of each row


def _mark_best(table: TableData, row: int, values: list[float | None], first_column: int, higher: bool) -> None:
    present = [(v, i) for i, v in enumerate(values) if v is not None]
    if len(present) < 2:
        return
    best = max(present)[0] if higher else min(present)[0]
    table.strong |= {(row, first_column + i) for v, i in present if v == best}


def _per_level(comparison: Comparison, title: str, groups: list[tuple[str, Getter, Fmt, bool]]) -> TableData:
    columns = [Column(_load_header(comparison), "right")]
    for group, _, _, _ in groups:
        columns += [Column(s.label, "right", group) for s in comparison.series]
    table = TableData(title, columns)
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
            _mark_best(table, len(table.rows), values, len(row) - len(values), higher)
        table.add(row)
    return table


def throughput_table(comparison: Comparison) -> TableData:
    return _per_level(
        comparison,
        "Throughput by load",
        [
            ("output tok/s", lambda s, p: p.throughput, tok_s, HIGHER),
            ("tok/s per GPU", lambda s, p: s.per_gpu(p.throughput), tok_s, HIGHER),
        ],
    )


def latency_table(comparison: Comparison) -> TableData:
    return _per_level(
        comparison,
        "Latency by load",
        [
            ("P50 latency (s)", lambda s, p: p.p50_e2el_ms, seconds, LOWER),
            ("P99 latency (s)", lambda s, p: p.p99_e2el_ms, seconds, LOWER),
        ],
    )


def ttft_itl_table(comparison: Comparison) -> TableData:
    return _per_level(
        comparison,
        "Time to first token and inter-token latency by load",
        [
            ("mean TTFT (ms)", lambda s, p: p.mean_ttft_ms, millis, LOWER),
            ("mean ITL (ms)", lambda s, p: p.mean_itl_ms, millis, LOWER),
        ],
    )


def equal_load_table(comparison: Comparison) -> TableData:
    base = comparison.baseline
    columns = [Column("Output tok/s (baseline at)", "right")]
    columns += [Column(s.label, "right", "mean latency (s)") for s in comparison.series]
    columns += [Column(s.label, "right", "mean ITL (ms)") for s in comparison.series]
    table = TableData(
        "Latency at equal load",
        columns,
        caption=f"Each run's latency at the throughputs {base.label} reached, interpolated between "
        "its levels up to its peak; '-' where a run did not span that throughput.",
    )
    for load in comparison.equal_loads():
        row = [f"{tok_s(load.throughput)} (C={load.level.removeprefix('c')})"]
        for metric, fmt in (("mean_e2el_ms", seconds), ("mean_itl_ms", millis)):
            base_value = at_throughput(base.points, load.throughput, metric)
            values = [at_throughput(s.points, load.throughput, metric) for s in comparison.series]
            for index, value in enumerate(values):
                row.append(with_ratio(value, base_value, fmt, is_base=index == 0))
            _mark_best(table, len(table.rows), values, len(row) - len(values), LOWER)
        table.add(row)
    return table


def comparison_tables(comparison: Comparison) -> list[TableData]:
    """Every table of `orch compare`, in the order printed."""
    tables = [
        overview_table(comparison),
        headline_table(comparison),
        throughput_table(comparison),
        latency_table(comparison),
        ttft_itl_table(comparison),
    ]
    if len(comparison.series) > 1:
        tables.append(equal_load_table(comparison))
    return tables
