"""A fleet beside one box (pure): when some runs of a comparison went through vLLM's router
(their level files carry the `router` block) and others did not, each fleet's peak against
the first one-box run's: per GPU (a replica's GPUs x replicas) and its scaling per replica,
fleet peak / (replicas x one-box peak); 1.0 is perfect scaling."""

from __future__ import annotations

from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import MISSING, tok_s
from orchestrator.tables import Column, TableData

TITLE = "A fleet beside one box"


def fleet_compare_table(comparison: Comparison) -> TableData | None:
    """None unless a fleet and a one-box run are compared."""
    box = comparison.one_box()
    if box is None:
        return None
    fleets = [s for s in comparison.series if s.replicas]
    factors = comparison.scaling()
    table = TableData(
        TITLE,
        [Column("Run"), Column("Replicas", "right"), Column("GPUs", "right"), Column("Peak (tok/s)", "right"),
         Column("Peak per GPU (tok/s)", "right"), Column(f"Scaling per replica (vs {box.label})", "right")],
        caption=f"Scaling per replica: the fleet's peak / (replicas x {box.label}'s peak); 1.00 is a "
        "replica doing what one box does. GPUs: a replica's GPUs x replicas.",
    )
    for s in [box, *fleets]:
        peak = s.peak.output_throughput if s.peak else None
        count = s.gpus.count * (s.replicas or 1) if s.gpus.count else None
        factor = factors.get(s.label) if s.replicas else None
        table.add([s.label, str(s.replicas or 1), str(count) if count else MISSING,
                   tok_s(peak) if peak is not None else MISSING,
                   tok_s(v) if (v := s.per_gpu(peak)) is not None else MISSING,
                   f"{factor:.2f}" if factor is not None else MISSING])
    return table
