"""What the GPUs did during each level (pure): the `gpu_telemetry` block the nvidia-smi
sampler leaves in a level's result (orchestrator/bench/gpu_telemetry.py, gpu_figures.py), as
the report's "GPU telemetry" table: power (mean and peak, all GPUs together), the energy of
the level, utilization, memory, temperature, SM clock and the GPUs that throttled.

Power, temperature, clocks and the level's energy (`energy_j`: its mean power over its
duration) are what was measured, in wall time, for a simulated run too; tokens per joule
follow the comparison's time (energy_table.py).
A host without nvidia-smi (`source: none`) or a plan that turned the sampler off (`off`, or
no block) has no rows; `telemetry_notes` says which runs and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import MISSING
from orchestrator.report.series import Series
from orchestrator.runs.run_records import LevelResult
from orchestrator.tables import Column, TableData

SAMPLED = "nvidia-smi"


@dataclass(frozen=True)
class GpuLevel:
    level: str
    concurrency: float
    gpu_count: int | None
    mean_power_w: float | None  # all GPUs together
    max_power_w: float | None
    energy_j: float | None  # joules over the level's duration, as measured
    mean_util_pct: float | None
    max_mem_used_mib: float | None
    max_temp_c: float | None
    mean_sm_clock_mhz: float | None
    min_sm_clock_mhz: float | None
    throttled_gpus: tuple[int, ...]

    @property
    def throttled(self) -> bool:
        return bool(self.throttled_gpus)


def _number(block: dict[str, Any], key: str) -> float | None:
    value = block.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def telemetry_of(result: LevelResult) -> dict[str, Any] | None:
    block = result.extra("gpu_telemetry")
    return block if isinstance(block, dict) else None


def gpu_level(result: LevelResult) -> GpuLevel | None:
    """A level's GPU figures; None when its GPUs were not sampled (no nvidia-smi, the
    sampler off, or a level over before nvidia-smi's first sample)."""
    block = telemetry_of(result)
    if block is None or block.get("source") != SAMPLED or not block.get("samples"):
        return None
    throttled = block.get("throttled_gpus")
    count = block.get("gpu_count")
    load = result.request_rate if result.mode == "rate" else result.max_concurrency
    energy = result.figure("energy_j", model_time=False)
    return GpuLevel(
        level=result.level,
        concurrency=float(load) if isinstance(load, int | float) else 0.0,
        gpu_count=int(count) if isinstance(count, int) else None,
        mean_power_w=_number(block, "mean_power_w"),
        max_power_w=_number(block, "max_power_w"),
        energy_j=energy if energy is not None else _number(block, "energy_j"),
        mean_util_pct=_number(block, "mean_util_pct"),
        max_mem_used_mib=_number(block, "max_mem_used_mib"),
        max_temp_c=_number(block, "max_temp_c"),
        mean_sm_clock_mhz=_number(block, "mean_sm_clock_mhz"),
        min_sm_clock_mhz=_number(block, "min_sm_clock_mhz"),
        throttled_gpus=tuple(int(i) for i in throttled) if isinstance(throttled, list) else (),
    )


def gpu_levels(s: Series) -> list[GpuLevel]:
    """The levels of a series whose GPUs were sampled, by load."""
    levels = s.host.bench.levels if s.host.bench else []
    found = [g for result in levels if (g := gpu_level(result))]
    return sorted(found, key=lambda g: g.concurrency)


def any_gpu_telemetry(series: Sequence[Series]) -> bool:
    return any(gpu_levels(s) for s in series)


def _fmt(value: float | None, pattern: str) -> str:
    return MISSING if value is None else pattern.format(value)


def gpu_table(comparison: Comparison) -> TableData | None:
    """One row per sampled level of each run; None when no run's GPUs were sampled."""
    if not any_gpu_telemetry(comparison.series):
        return None
    table = TableData(
        "GPU telemetry by level",
        [Column("Run"), Column("Level", "right"), Column("GPUs", "right"),
         Column("Mean W", "right", "power (all GPUs)"), Column("Peak W", "right", "power (all GPUs)"),
         Column("Energy (J)", "right"), Column("Util %", "right"), Column("Memory (GiB)", "right", priority=1),
         Column("Max temp (C)", "right"), Column("Mean MHz", "right", "SM clock"),
         Column("Min MHz", "right", "SM clock"), Column("Throttled")],
        caption="nvidia-smi on the host, sampled through each level: power summed over the GPUs, "
        "utilization averaged over them, the hottest GPU and the slowest SM clock. Energy: the "
        "level's mean power over its duration. Throttled: a GPU whose SM clock fell 10% or more "
        "while at its power limit or at 85 C. Power, energy and clocks are as measured (wall time), "
        "for simulated runs too.",
    )  # fmt: skip
    for s in comparison.series:
        for g in gpu_levels(s):
            memory = None if g.max_mem_used_mib is None else g.max_mem_used_mib / 1024
            throttled = ("GPU " + ", ".join(str(i) for i in g.throttled_gpus)) if g.throttled else "no"
            table.add([
                s.label, g.level, MISSING if g.gpu_count is None else str(g.gpu_count),
                _fmt(g.mean_power_w, "{:,.0f}"), _fmt(g.max_power_w, "{:,.0f}"), _fmt(g.energy_j, "{:,.0f}"),
                _fmt(g.mean_util_pct, "{:.0f}"), _fmt(memory, "{:,.1f}"), _fmt(g.max_temp_c, "{:.0f}"),
                _fmt(g.mean_sm_clock_mhz, "{:,.0f}"), _fmt(g.min_sm_clock_mhz, "{:,.0f}"), throttled,
            ])  # fmt: skip
    return table


def telemetry_notes(series: Sequence[Series]) -> list[str]:
    """A sentence for each run whose GPUs were not sampled, with the sampler's reason."""
    notes = []
    for s in series:
        if gpu_levels(s):
            continue
        blocks = [b for result in (s.host.bench.levels if s.host.bench else []) if (b := telemetry_of(result))]
        reason = next((str(b.get("reason")) for b in blocks if b.get("reason")), None)
        if reason is None and blocks:
            reason = f"source {blocks[0].get('source')}"
        notes.append(f"{s.label}: no GPU telemetry ({reason or 'none recorded: bench.gpu_telemetry off, or an older run'})")
    return notes
