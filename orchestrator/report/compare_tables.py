"""The tables of a comparison, as data (`TableData`): runs, headline figures, throughput per
load level, each latency per level and percentile (latency_tables.py), how the
requests ended (outcome_table.py), and latency at equal load.

Every figure of a run other than the first carries its ratio to the first (the baseline),
e.g. `2,276.0 (1.84x)`; the best run of each row is in bold. A `*` marks a level with
flags (see the warnings).
"""

from __future__ import annotations

from orchestrator.report.comparison import Comparison
from orchestrator.report.energy_table import energy_table
from orchestrator.report.figures import at_throughput
from orchestrator.report.fleet_compare import fleet_compare_table
from orchestrator.report.fleet_table import fleet_table
from orchestrator.report.latency_tables import latency_tables
from orchestrator.report.level_table import (
    HIGHER,
    LOWER,
    MISSING,
    at,
    mark_best,
    millis,
    per_level,
    seconds,
    tok_s,
    with_ratio,
)
from orchestrator.report.outcome_table import outcome_table
from orchestrator.report.plateaus import plateau_table
from orchestrator.report.run_context import kernels_table
from orchestrator.tables import Column, TableData

__all__ = ["MISSING", "captions", "comparison_tables", "with_ratio"]


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
    base_single = base.single_stream.output_throughput if base.single_stream else None
    base_peak = base.peak.output_throughput if base.peak else None
    for index, s in enumerate(comparison.series):
        single = s.single_stream.output_throughput if s.single_stream else None
        top = s.peak
        first = index == 0
        table.add(
            [
                s.label,
                with_ratio(single, base_single, tok_s, is_base=first),
                with_ratio(top.output_throughput if top else None, base_peak, tok_s, is_base=first),
                at(top.key) if top else MISSING,
                with_ratio(
                    s.per_gpu(top.output_throughput if top else None), base.per_gpu(base_peak), tok_s, is_base=first
                ),
                f"C={s.knee}" if s.knee is not None else s.knee_how,
            ]
        )
    return table


def throughput_table(comparison: Comparison) -> TableData:
    return per_level(
        comparison,
        "Throughput by load",
        [
            ("output tok/s", lambda s, p: p.output_throughput, tok_s, HIGHER),
            ("tok/s per GPU", lambda s, p: s.per_gpu(p.output_throughput), tok_s, HIGHER),
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
            mark_best(table, len(table.rows), values, len(row) - len(values), LOWER)
        table.add(row)
    return table


def comparison_tables(comparison: Comparison) -> list[TableData]:
    """Every table of `orch compare`, in the order printed."""
    tables = [
        overview_table(comparison),
        headline_table(comparison),
        plateau_table(comparison.series),
        throughput_table(comparison),
        *latency_tables(comparison),
        outcome_table(comparison),
    ]
    energy = energy_table(comparison)
    if energy is not None:
        tables.insert(4, energy)  # beside the throughput it is made of
    tables += [t for t in (fleet_table(comparison), fleet_compare_table(comparison)) if t is not None]
    if len(comparison.series) > 1:
        tables.append(equal_load_table(comparison))
    kernels = kernels_table(comparison)
    if kernels.rows:
        tables.append(kernels)
    return tables
