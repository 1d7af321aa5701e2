"""GPU telemetry from NVIDIA's DCGM exporter, for a host that has one and no nvidia-smi the
sampler can run (a container, a Kubernetes node): `DcgmSampler` scrapes its `/metrics`
(port 9400 by default, reached through the transport's port forward) every interval of a
repeat, as the server's `/metrics` is scraped (server_metrics.py `Scraper`), and fills the
same `gpu_telemetry` block as the nvidia-smi sampler, with `source: dcgm-exporter`: its
samples become `gpu<index>.<figure>` snapshots and gpu_figures.py summarizes them.

The exporter's default counters (dcgm-exporter's etc/default-counters.csv) map as:
DCGM_FI_DEV_POWER_USAGE (W) -> power, DCGM_FI_DEV_GPU_UTIL (%) -> utilization,
DCGM_FI_DEV_MEM_COPY_UTIL (%) -> memory utilization, DCGM_FI_DEV_FB_USED and _FB_FREE (MiB)
-> memory used and total, DCGM_FI_DEV_GPU_TEMP (C) -> temperature, DCGM_FI_DEV_SM_CLOCK
(MHz) -> SM clock, DCGM_FI_DEV_POWER_MGMT_LIMIT (W, when exported) -> the power limit.
Each line names its GPU by the `gpu` label, with `UUID` and `modelName`.

The profiling (DCP) fields, when the exporter's collectors include them (its
etc/dcp-metrics-included.csv; DCGM's field identifiers 1002-1012, all gauges), are the
evidence of the limiter rules (limits/evidence.py reads these keys):
DCGM_FI_PROF_SM_ACTIVE (ratio 0-1 of cycles an SM has a warp assigned) -> `sm_active`;
DCGM_FI_PROF_PCIE_RX_BYTES and _TX_BYTES (bytes per second, headers included) ->
`pcie_rx_mb_s` and `pcie_tx_mb_s` (MB = 1e6 bytes); DCGM_FI_PROF_NVLINK_RX_BYTES + _TX_BYTES
(bytes per second) -> `nvlink_mb_s`, both directions summed; DCGM_FI_PROF_DRAM_ACTIVE (ratio
of cycles the memory interface is busy) -> `mem_util_pct` (x100) only where the scrape has no
DCGM_FI_DEV_MEM_COPY_UTIL: one figure for one question (how busy device memory was), the
default counter first because every exporter has it and earlier levels were read from it.
An exporter without them (the default collectors, an older one) leaves the keys out.

An exporter that misbehaves (no answer, an error, garbage, a body without end: scrape.py's
bounds) never stops the benchmark: the level's `gpu_telemetry` says `DCGM exporter at URL:
<what was wrong>` (its `reason` when nothing was sampled, else its `problem`), and a reading
that is not one (NaN, Inf, negative, a line that is not a sample) is never counted.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from orchestrator import http_deadline
from orchestrator.bench.gpu_figures import (
    WindowEnd,
    level_energy,
    merge_summaries,
    summarize_samples,
)
from orchestrator.bench.gpu_ranges import (
    MAX_GPU_INDEX,
    MAX_LABEL,
    gpu_index,
    impossible_problem,
    out_of_range,
)
from orchestrator.bench.samplers import Sampler, Snapshot
from orchestrator.bench.scrape import fetch
from orchestrator.bench.server_metrics import Scraper, rejected_problem

FIELDS = {
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "mem_util_pct",
    "DCGM_FI_DEV_FB_USED": "mem_used_mib",
    "DCGM_FI_DEV_FB_FREE": "mem_free_mib",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "pcie_rx_mb_s",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "pcie_tx_mb_s",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "nvlink_rx_mb_s",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "nvlink_tx_mb_s",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active_pct",
}
SCALES = {  # a field's unit -> the figure's: bytes/s -> MB/s, a ratio -> percent
    "DCGM_FI_PROF_PCIE_RX_BYTES": 1e-6,
    "DCGM_FI_PROF_PCIE_TX_BYTES": 1e-6,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": 1e-6,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": 1e-6,
    "DCGM_FI_PROF_DRAM_ACTIVE": 100.0,
}
_LINE = re.compile(r"^(DCGM_FI_(?:DEV|PROF)_\w+)\{([^}]*)\}\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_dcgm(lines: Sequence[str], rejected: list[str] | None = None,
               impossible: list[str] | None = None,
               ) -> tuple[dict[str, float], dict[int, tuple[str, str]]]:
    """One scrape's lines -> values keyed `gpu<index>.<figure>`, and each GPU's (UUID,
    model name). Lines without a `gpu` label and unknown fields are skipped; garbage and
    values that are not readings (NaN, Inf, negative) go to `rejected`, finite ones out of
    their figure's range (gpu_ranges.py) and a `gpu` label that is not a small index to
    `impossible`; the memory total is used + free."""
    values: dict[str, float] = {}
    gpus: dict[int, tuple[str, str]] = {}
    for line in lines:
        match = _LINE.match(line.strip())
        if match is None or match.group(1) not in FIELDS:
            if match is None and line.startswith("DCGM_FI_") and rejected is not None:
                rejected.append(line.strip())
            continue
        labels = dict(_LABEL.findall(match.group(2)))
        reading = _reading(match.group(1), labels, match.group(3))
        if isinstance(reading, str):
            if reading == _NOT_A_READING and rejected is not None:
                rejected.append(line.strip())
            elif reading and reading != _NOT_A_READING and impossible is not None:
                impossible.append(reading)
            continue
        index, value = reading
        values[f"gpu{index}.{FIELDS[match.group(1)]}"] = value
        gpus.setdefault(index, (labels.get("UUID", "")[:MAX_LABEL], labels.get("modelName", "")[:MAX_LABEL]))
    for index in gpus:
        _derived(values, f"gpu{index}.")
    return values, gpus


_NOT_A_READING = "not a reading"


def _reading(name: str, labels: Mapping[str, str], text: str) -> tuple[int, float] | str:
    """(GPU index, value in the figure's unit) of one line, or why not: "" for a line of no
    one GPU (skipped), `_NOT_A_READING` for NaN, Inf or a negative, else what is out of range."""
    gpu = labels.get("gpu", "")
    if not gpu.isdigit():
        return ""  # not one GPU's line
    index = gpu_index(gpu)
    if index is None:
        return f"{name} of GPU label {gpu[:24]!r}: not a GPU index (0 to {MAX_GPU_INDEX})"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        return _NOT_A_READING
    value *= SCALES.get(name, 1.0)
    why = out_of_range(FIELDS[name], value)
    return f"{name} of GPU {index}: {why}" if why else (index, value)


def _derived(values: dict[str, float], gpu: str) -> None:
    """One GPU's figures made of others: memory total, NVLink both ways, DRAM activity."""
    used, free = values.get(gpu + "mem_used_mib"), values.pop(gpu + "mem_free_mib", None)
    if used is not None and free is not None:
        values[gpu + "mem_total_mib"] = used + free
    links = [v for key in ("nvlink_rx_mb_s", "nvlink_tx_mb_s") if (v := values.pop(gpu + key, None)) is not None]
    if links:
        values[gpu + "nvlink_mb_s"] = sum(links)
    dram = values.pop(gpu + "dram_active_pct", None)
    if dram is not None:
        values.setdefault(gpu + "mem_util_pct", dram)


def answers(url: str) -> bool:
    """Whether a DCGM exporter serves `url` (one GET, two seconds at most)."""
    return not not_serving(url)[0]


def not_serving(url: str) -> tuple[str, bool]:
    """What keeps `url` from being a DCGM exporter's page ("" when it is one), and whether
    it is that nothing is there (refused, or closed before a word)."""
    with http_deadline.client(1.0) as client:
        page = fetch(client, url, ("DCGM_FI_DEV_",), 1.0)
    if page.problem:
        return page.problem, page.nobody
    return ("", False) if page.lines else ("its answer holds no DCGM_FI_DEV_ line", False)


@dataclass
class DcgmSampler(Scraper):
    """The exporter's `/metrics` at `url`, every `interval` seconds of a repeat."""

    wanted: tuple[str, ...] = tuple(FIELDS)
    gpus: dict[int, tuple[str, str]] = field(default_factory=dict)
    block: ClassVar[str] = "gpu_telemetry"
    repeat_keys: ClassVar[tuple[str, ...]] = ("mean_power_w", "energy_j")
    _end_s: float = 0.0
    where: str = ""  # how the exporter is named in what is said, when not by `url`
    what: ClassVar[str] = "DCGM exporter"

    def said(self, problem: str) -> str:
        return f"{self.what} at {self.where}: {problem}" if self.where else super().said(problem)

    def stop(self) -> None:
        self._end_s = (time.perf_counter_ns() - self.origin_ns) / 1e9
        super().stop()

    def snapshots(self) -> list[Snapshot]:
        out: list[Snapshot] = []
        rejected: list[str] = []
        impossible: list[str] = []
        for t, lines in self._raw:
            values, gpus = parse_dcgm(lines, rejected, impossible)
            self.gpus.update(gpus)
            if values:
                out.append(Snapshot(t, values))
        problem = self.problem or (rejected_problem(rejected) if rejected else "") or (
            impossible_problem(impossible) if impossible else "")
        if self.failures and self.problem:
            problem = f"{problem} ({self.failures} scrape(s) failed)"
        elif not out:
            problem = problem or "its answers held no DCGM_FI_ reading orch reads"
        said = self.said(problem) if problem else ""
        return [*out, WindowEnd(max(self._end_s, out[-1].t_s if out else 0.0), {}, said)]

    def summarize(self, snapshots: Sequence[Snapshot]) -> dict[str, Any]:
        if not self.interval:
            return {"source": "off"}
        return {**summarize_samples(snapshots, self.gpus, interval_s=self.interval),
                "source": "dcgm-exporter"}

    def merge(self, repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        return merge_summaries(repeats)

    def level_figures(self, block: Mapping[str, Any] | None,
                      level: Mapping[str, Any]) -> dict[str, Any]:
        return level_energy(block, level)


def _is_a_sampler(sampler: DcgmSampler) -> Sampler:  # mypy checks the protocol here
    return sampler
