"""What a GPU reading can be (pure): a host's nvidia-smi and its DCGM exporter are read as
they answer, and a finite number can still be impossible (1e308 W, SM activity 1e300, a GPU
labelled by a 23-digit number). gpu_figures.py (nvidia-smi's lines) and dcgm.py (the
exporter's) check each figure here where they parse it.
"""

from __future__ import annotations

from collections.abc import Sequence

# What a reading can be, per figure (a snapshot's units; DCGM's before its NVLink directions
# are summed and its DRAM activity stands in for memory utilization). A value outside is not
# a reading, however finite: left out, said in the level's `problem`, never summed into a
# total or handed to a verdict. The bounds are generous: link rates are held under twice the
# fastest link there is (PCIe 7.0 x16, 256 GB/s each way; NVLink 5, 900 GB/s each way, four
# times), not under the host's own link's peak, which a scrape does not know.
RANGES: dict[str, tuple[float, float]] = {
    "power_w": (0.0, 5000.0), "power_limit_w": (0.0, 5000.0),  # W: 5 kW
    "util_pct": (0.0, 100.0), "mem_util_pct": (0.0, 100.0), "dram_active_pct": (0.0, 100.0),
    "mem_used_mib": (0.0, 2.0**24), "mem_free_mib": (0.0, 2.0**24),  # MiB: 16 TiB
    "mem_total_mib": (0.0, 2.0**24),
    "temp_c": (-40.0, 150.0),
    "sm_clock_mhz": (0.0, 10_000.0),
    "sm_active": (0.0, 1.0),  # a ratio
    "pcie_rx_mb_s": (0.0, 512_000.0), "pcie_tx_mb_s": (0.0, 512_000.0),  # MB/s
    "nvlink_rx_mb_s": (0.0, 3_600_000.0), "nvlink_tx_mb_s": (0.0, 3_600_000.0),
    "nvlink_mb_s": (0.0, 7_200_000.0),  # both ways
}
MAX_GPU_INDEX = 1023  # a GPU's index (nvidia-smi's, DCGM's `gpu` label): a small number
MAX_LABEL = 120  # characters kept of a GPU's UUID and name


def out_of_range(key: str, value: float) -> str | None:
    """Why `value` is not a reading of figure `key` (None when it is one)."""
    low, high = RANGES.get(key, (0.0, float("inf")))
    if low <= value <= high:
        return None
    return f"{key} {value:g} is not a reading ({low:g} to {high:g})"


def gpu_index(text: str) -> int | None:
    """A GPU's index as a host names it, None when it is not a small number."""
    text = text.strip()
    if not text.isdigit() or len(text) > 4 or int(text) > MAX_GPU_INDEX:
        return None
    return int(text)


def impossible_problem(impossible: Sequence[str]) -> str:
    """What the out-of-range readings were, for a sampler's `problem`: said once."""
    return f"{len(impossible)} reading(s) out of range left out, first: {impossible[0][:160]}"
