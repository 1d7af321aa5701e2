"""GPU telemetry figures, pure: nvidia-smi's CSV lines -> samples -> a level's `gpu_telemetry`.

The sampler (gpu_telemetry.py: `GpuSampler`) keeps the lines it read and when it read them;
everything here works on those afterwards, off the timing path:

- `parse_line`: one line of `nvidia-smi --query-gpu=<QUERY> --format=csv,...` -> `Reading`,
  None for anything else. Tolerated: the header line, units (`85.32 W`, `1 MiB`, `0 %`,
  `180 MHz`, as `--format=csv` without `nounits` writes them), `[N/A]`, `[Not Supported]`
  and other bracketed answers (the field is missing, the line is kept), blank or garbage
  lines (skipped and counted).
- `group_lines`: timed lines -> one `Snapshot` per round of nvidia-smi's loop (all GPUs'
  lines of one round; values keyed `gpu<index>.<figure>`, e.g. `gpu3.power_w`).
- `summarize_samples`: one repeat's summary; `merge_summaries`: the level's block.
- `energy_figures`: output tokens per joule and per second per watt, for the level result.

Energy is the trapezoid of the total power (every GPU's `power.draw` summed) over the
repeat's window [0, end]: from its time zero to its stop, the first reading held back to
time zero and the last one held to the stop (nvidia-smi's first round comes a little after
the start, its last one up to one interval before the stop). A round that lacks the power of
a GPU that has one elsewhere in the repeat is left out of the total (not counted as 0 W).

Throttling (a GPU's clocks held down by its power cap or its temperature), per GPU and
repeat: a sample is throttled when its SM clock is at least `CLOCK_DROP` (10%) below the
GPU's highest SM clock in the repeat while its power draw is at least `AT_LIMIT` (95%) of
its power limit (reason `power`) or its temperature is at least `HOT_C` (85 C, reason
`temperature`); the GPU is flagged `throttled` from `MIN_THROTTLED` (2) such samples. A GPU
idling at a low clock draws little power and runs cool, so it is not taken for throttled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from orchestrator.bench.gpu_ranges import MAX_LABEL, gpu_index, out_of_range
from orchestrator.bench.samplers import Snapshot

QUERY = ("index", "uuid", "name", "power.draw", "power.limit", "utilization.gpu",
         "utilization.memory", "memory.used", "memory.total", "temperature.gpu", "clocks.sm")
FIGURES = {  # the numeric fields of QUERY, in order -> their key in a snapshot
    "power.draw": "power_w",
    "power.limit": "power_limit_w",
    "utilization.gpu": "util_pct",
    "utilization.memory": "mem_util_pct",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "temperature.gpu": "temp_c",
    "clocks.sm": "sm_clock_mhz",
}
# DCGM's profiling fields (bench/dcgm.py), per GPU: SM activity 0-1, PCIe receive and send and
# NVLink both ways in MB/s. Absent from nvidia-smi's samples and from older exporters' (and
# then from the summary): limits/evidence.py reads them where present.
PROFILING = ("sm_active", "pcie_rx_mb_s", "pcie_tx_mb_s", "nvlink_mb_s")
EXIT_MARK = "orch-nvidia-smi-exit"  # the line the sampler's command prints when nvidia-smi ends

CLOCK_DROP = 0.10
AT_LIMIT = 0.95
HOT_C = 85.0
MIN_THROTTLED = 2

_NUMBER = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*(?:W|MiB|MB|GiB|%|MHz|C)?$")
_KEY = re.compile(r"^gpu(\d+)\.(\w+)$")


@dataclass(frozen=True)
class Reading:
    """One GPU's line of one round; `values` has only the figures it gave (not `[N/A]`)."""

    index: int
    uuid: str
    name: str
    values: Mapping[str, float]
    impossible: tuple[str, ...] = ()  # figures out of range (RANGES), left out of `values`


@dataclass(frozen=True)
class WindowEnd(Snapshot):
    """The last snapshot of a repeat: not a sample but its stop (`t_s`), with what went
    wrong if anything (`problem`: nvidia-smi's own words, e.g. a driver it cannot reach).
    `values` counts `unparsed` lines and gives nvidia-smi's `exit_code` when it ended before
    the stop."""

    problem: str = ""


def number(text: str) -> float | None:
    """`85.32`, `85.32 W`, `97887 MiB`, `0 %` -> the number; `[N/A]`, `N/A`, garbage -> None."""
    match = _NUMBER.match(text.strip())
    return float(match.group(1)) if match else None


def is_header(line: str) -> bool:
    return line.strip().lower().startswith("index,")


def parse_line(line: str) -> Reading | None:
    """One CSV line of the QUERY fields -> a Reading; None for a header, blank or garbage
    line (a GPU name with a comma in it is kept whole: it is what lies between the uuid and
    the last eight fields)."""
    parts = [part.strip() for part in line.split(",")]
    if len(parts) < len(QUERY):
        return None
    index = gpu_index(parts[0])
    if index is None or not parts[1]:
        return None
    numeric = parts[-len(FIGURES):]
    name = ", ".join(parts[2:-len(FIGURES)])
    read = {key: value for key, text in zip(FIGURES.values(), numeric, strict=True)
            if (value := number(text)) is not None}
    impossible = tuple(f"GPU {index} {why}" for key, value in read.items()
                       if (why := out_of_range(key, value)) is not None)
    values = {key: value for key, value in read.items() if out_of_range(key, value) is None}
    return Reading(index, parts[1][:MAX_LABEL], name[:MAX_LABEL], values, impossible)


@dataclass
class Grouped:
    """What a repeat's lines say: its samples, the GPUs seen, what could not be read."""

    snapshots: list[Snapshot] = field(default_factory=list)
    gpus: dict[int, tuple[str, str]] = field(default_factory=dict)  # index -> (uuid, name)
    unparsed: list[str] = field(default_factory=list)
    impossible: list[str] = field(default_factory=list)  # readings out of range, left out
    exit_code: int | None = None


def group_lines(lines: Iterable[tuple[float, str]]) -> Grouped:
    """Timed lines (seconds since the repeat's time zero, text) -> one snapshot per round of
    nvidia-smi's loop, at the time of its first line. A round ends at a header line or at a
    GPU seen again, never at a pause: a reader may hand over the rest of a round only with
    the next one (the local transport's buffered pipe does), and the round's time is still
    the time its first line came."""
    out = Grouped()
    current: dict[str, float] = {}
    seen: set[int] = set()
    started = 0.0

    def close() -> None:
        if current:
            out.snapshots.append(Snapshot(started, dict(current)))
        current.clear()
        seen.clear()

    for t_s, line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith(EXIT_MARK):
            try:
                out.exit_code = int(text.split()[-1])
            except ValueError:
                out.exit_code = -1
            continue
        if is_header(text):
            close()
            continue
        reading = parse_line(text)
        if reading is None:
            out.unparsed.append(text)
            continue
        if reading.index in seen:
            close()
        if not current:
            started = t_s
        seen.add(reading.index)
        out.impossible += reading.impossible
        out.gpus[reading.index] = (reading.uuid, reading.name)
        for key, value in reading.values.items():
            current[f"gpu{reading.index}.{key}"] = value
        if not reading.values:  # every field `[N/A]`: the GPU was there all the same
            current[f"gpu{reading.index}.seen"] = 1.0
    close()
    return out


def without_cut_round(snapshots: list[Snapshot]) -> list[Snapshot]:
    """The samples but a last round with fewer GPUs than the repeat's fullest one: the
    stop cut it (its other lines were on their way, or waiting in the reader's buffer)."""
    if len(snapshots) < 2:
        return snapshots
    gpus = [len({key.partition(".")[0] for key in s.values}) for s in snapshots]
    return snapshots[:-1] if gpus[-1] < max(gpus) else snapshots


def per_gpu(snapshot: Snapshot) -> dict[int, dict[str, float]]:
    """A sample's values by GPU index: {3: {"power_w": 412.5, ...}}."""
    out: dict[int, dict[str, float]] = {}
    for key, value in snapshot.values.items():
        match = _KEY.match(key)
        if match:
            out.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return out


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def _max(values: Sequence[float]) -> float | None:
    return max(values) if values else None


def _min(values: Sequence[float]) -> float | None:
    return min(values) if values else None


def energy_joules(points: Sequence[tuple[float, float]], end_s: float) -> float:
    """The trapezoid of (t_s, watts) over [0, end_s], the first reading held back to 0 and
    the last one held to `end_s`."""
    if not points:
        return 0.0
    points = sorted(points)
    total = points[0][1] * max(0.0, points[0][0])
    for (t0, w0), (t1, w1) in pairwise(points):
        total += (w0 + w1) / 2 * (t1 - t0)
    total += points[-1][1] * max(0.0, end_s - points[-1][0])
    return total


def throttled_samples(samples: Sequence[Mapping[str, float]]) -> tuple[int, list[str]]:
    """How many of one GPU's samples are throttled, and the reasons seen (module doc)."""
    clocks = [s["sm_clock_mhz"] for s in samples if "sm_clock_mhz" in s]
    if not clocks:
        return 0, []
    peak = max(clocks)
    count, reasons = 0, set()
    for s in samples:
        clock = s.get("sm_clock_mhz")
        if clock is None or clock > peak * (1 - CLOCK_DROP):
            continue
        power, limit, temp = s.get("power_w"), s.get("power_limit_w"), s.get("temp_c")
        why = set()
        if power is not None and limit and power >= AT_LIMIT * limit:
            why.add("power")
        if temp is not None and temp >= HOT_C:
            why.add("temperature")
        if why:
            count += 1
            reasons |= why
    return count, sorted(reasons)


def _gpu_summary(index: int, identity: tuple[str, str] | None,
                 samples: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    def column(key: str) -> list[float]:
        return [s[key] for s in samples if key in s]

    count, reasons = throttled_samples(samples)
    uuid, name = identity or ("", "")
    return {
        "index": index,
        "uuid": uuid,
        "name": name,
        "samples": len(samples),
        "mean_power_w": _mean(column("power_w")),
        "max_power_w": _max(column("power_w")),
        "power_limit_w": _max(column("power_limit_w")),
        "mean_util_pct": _mean(column("util_pct")),
        "mean_mem_util_pct": _mean(column("mem_util_pct")),
        "max_mem_used_mib": _max(column("mem_used_mib")),
        "mem_total_mib": _max(column("mem_total_mib")),
        "max_temp_c": _max(column("temp_c")),
        "mean_sm_clock_mhz": _mean(column("sm_clock_mhz")),
        "min_sm_clock_mhz": _min(column("sm_clock_mhz")),
        "max_sm_clock_mhz": _max(column("sm_clock_mhz")),
        "throttled": count >= MIN_THROTTLED,
        "throttled_samples": count,
        "throttle_reasons": reasons,
        **{f"mean_{key}": value for key in PROFILING if (value := _mean(column(key))) is not None},
    }


def summarize_samples(snapshots: Sequence[Snapshot], gpus: Mapping[int, tuple[str, str]] | None = None,
                      *, interval_s: float | None = None) -> dict[str, Any]:
    """One repeat's `gpu_telemetry` from its snapshots (a `WindowEnd` last gives the stop;
    without one the window ends at the last sample)."""
    end = next((s for s in reversed(snapshots) if isinstance(s, WindowEnd)), None)
    samples = sorted((s for s in snapshots if not isinstance(s, WindowEnd)), key=lambda s: s.t_s)
    problem = end.problem if end is not None else ""
    if not samples:
        return {"source": "nvidia-smi", "samples": 0,
                "reason": problem or "nvidia-smi gave no sample during the repeat"}
    end_s = max(end.t_s if end is not None else 0.0, samples[-1].t_s)
    by_gpu = [per_gpu(s) for s in samples]
    indexes = sorted({i for sample in by_gpu for i in sample})
    gpus = gpus or {}
    summaries = [_gpu_summary(i, gpus.get(i), [s[i] for s in by_gpu if i in s]) for i in indexes]
    powered = {i for sample in by_gpu for i, v in sample.items() if "power_w" in v}
    totals = [(s.t_s, sum(g[i]["power_w"] for i in powered))
              for s, g in zip(samples, by_gpu, strict=True)
              if powered and all(i in g and "power_w" in g[i] for i in powered)]
    watts = [w for _, w in totals]
    out: dict[str, Any] = {
        "source": "nvidia-smi",
        "interval_s": interval_s,
        "samples": len(samples),
        "window_s": round(end_s, 3),
        "first_sample_s": round(samples[0].t_s, 3),
        "gpu_count": len(indexes),
        "mean_power_w": _mean(watts),
        "max_power_w": _max(watts),
        "energy_j": round(energy_joules(totals, end_s), 1) if totals else None,
        "mean_util_pct": _mean([g["mean_util_pct"] for g in summaries if g["mean_util_pct"] is not None]),
        "max_mem_used_mib": _max([g["max_mem_used_mib"] for g in summaries if g["max_mem_used_mib"] is not None]),
        "max_temp_c": _max([g["max_temp_c"] for g in summaries if g["max_temp_c"] is not None]),
        "mean_sm_clock_mhz": _mean([g["mean_sm_clock_mhz"] for g in summaries
                                    if g["mean_sm_clock_mhz"] is not None]),
        "min_sm_clock_mhz": _min([g["min_sm_clock_mhz"] for g in summaries if g["min_sm_clock_mhz"] is not None]),
        "throttled": any(g["throttled"] for g in summaries),
        "throttled_gpus": [g["index"] for g in summaries if g["throttled"]],
        **_profiling_means(summaries),
        "gpus": summaries,
        "timeline": [_point(s.t_s, g, powered) for s, g in zip(samples, by_gpu, strict=True)],
    }
    if problem:
        out["problem"] = problem
    return out


def _profiling_means(summaries: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """`mean_<key>` over the GPUs that have it, for each PROFILING key some GPU has."""
    out: dict[str, float] = {}
    for key in PROFILING:
        values = [g[f"mean_{key}"] for g in summaries if g.get(f"mean_{key}") is not None]
        if values:
            out[f"mean_{key}"] = round(sum(values) / len(values), 4)
    return out


def _point(t_s: float, sample: Mapping[int, Mapping[str, float]], powered: set[int]) -> dict[str, Any]:
    utils = [v["util_pct"] for v in sample.values() if "util_pct" in v]
    clocks = [v["sm_clock_mhz"] for v in sample.values() if "sm_clock_mhz" in v]
    temps = [v["temp_c"] for v in sample.values() if "temp_c" in v]
    complete = bool(powered) and all(i in sample and "power_w" in sample[i] for i in powered)
    return {
        "t_s": round(t_s, 3),
        "power_w": round(sum(sample[i]["power_w"] for i in powered), 2) if complete else None,
        "util_pct": _mean(utils),
        "max_temp_c": _max(temps),
        "min_sm_clock_mhz": _min(clocks),
    }


_SUMMED = ("samples", "window_s", "energy_j", "throttled_samples")
_KEPT = ("source", "interval_s", "index", "uuid", "name", "gpu_count", "first_sample_s")


def _merge_flat(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Figures of several repeats (or of one GPU in several): means weighted by samples,
    peaks and lows over all, counts and energy summed, flags if any."""
    out: dict[str, Any] = {}
    keys = [k for part in parts for k in part]
    for key in dict.fromkeys(keys):
        present = [(p[key], p.get("samples") or 0) for p in parts if p.get(key) is not None]
        values = [v for v, _ in present]
        if key in _KEPT:
            out[key] = values[0] if values else None
        elif not present:
            out[key] = None
        elif key in _SUMMED:
            out[key] = round(sum(values), 3)
        elif key.startswith("mean_"):
            weight = sum(w for _, w in present)
            out[key] = round(sum(v * w for v, w in present) / weight, 2) if weight else _mean(values)
        elif key.startswith("min_"):
            out[key] = min(values)
        elif key.startswith("max_") or key.endswith(("_limit_w", "_total_mib")):
            out[key] = max(values)
        elif all(isinstance(v, bool) for v in values):
            out[key] = any(values)
        elif all(isinstance(v, list) for v in values):
            out[key] = sorted({x for v in values for x in v})
        else:
            out[key] = values[-1]
    return out


def merge_summaries(repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A level's `gpu_telemetry` from its repeats' summaries: None when telemetry was off;
    the first repeat's `source: none` block when the host has no nvidia-smi (or nothing was
    sampled); one repeat's summary as it is; else the repeats merged (`_merge_flat`, GPU by
    GPU), the last repeat's timeline, and each repeat's figures under `repeats`."""
    if not repeats or all(r.get("source") == "off" for r in repeats):
        return None
    sampled = [r for r in repeats if r.get("samples")]
    if not sampled:
        return dict(repeats[0])
    if len(sampled) == 1:
        return dict(sampled[0])
    flat = [{k: v for k, v in r.items() if k not in ("gpus", "timeline", "problem")} for r in sampled]
    merged = _merge_flat(flat)
    indexes = sorted({g["index"] for r in sampled for g in r.get("gpus", [])})
    merged["gpus"] = [_merge_flat([g for r in sampled for g in r.get("gpus", []) if g["index"] == i])
                      for i in indexes]
    merged["timeline"] = sampled[-1].get("timeline", [])
    merged["repeats"] = [{k: r.get(k) for k in ("samples", "window_s", "mean_power_w", "max_power_w",
                                                  "energy_j", "mean_util_pct", "throttled")}
                         for r in sampled]
    problems = [r["problem"] for r in repeats if r.get("problem")]
    if problems:  # what went wrong in a repeat stays said
        merged["problem"] = problems[-1]
    return merged


def level_energy(block: Mapping[str, Any] | None, level: Mapping[str, Any]) -> dict[str, Any]:
    """A GPU sampler's `level_figures` (samplers.py): `energy_figures` from the level's own
    figures; {} when telemetry was off."""
    if block is None:
        return {}
    return energy_figures(block, level.get("total_output_tokens") or 0, level.get("duration") or 0.0)


def energy_figures(block: Mapping[str, Any] | None, output_tokens: float,
                   duration_s: float) -> dict[str, float | None]:
    """The level's energy and its output tokens per joule and per second per watt, from its
    `gpu_telemetry` block and its figures (`total_output_tokens`, `duration`); None where
    the block has no power figure.

    `energy_j`: the energy of the level's `duration_s`, i.e. the block's energy over its
    sampled windows scaled from their length (`window_s`, each repeat's origin to its stop,
    a little longer than its requests) to `duration_s`: the windows' time-weighted mean power
    times the duration. `output_tokens_per_joule` = tokens / that energy;
    `output_tokens_per_s_per_w` = tokens / duration / `mean_power_w` (the mean of the
    samples). They are one quantity in two units (tok/J = tok/s/W) and differ only by how
    the power is averaged."""
    out: dict[str, float | None] = {"energy_j": None, "output_tokens_per_joule": None,
                                    "output_tokens_per_s_per_w": None}
    if not block or not block.get("samples") or duration_s <= 0:
        return out
    energy, window, power = block.get("energy_j"), block.get("window_s"), block.get("mean_power_w")
    if energy and window:
        out["energy_j"] = round(energy * duration_s / window, 1)
        out["output_tokens_per_joule"] = round(output_tokens / (energy * duration_s / window), 4)
    if power:
        out["output_tokens_per_s_per_w"] = round(output_tokens / duration_s / power, 4)
    return out
