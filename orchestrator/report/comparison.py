"""A comparison of runs: their series (the first is the baseline), the load levels they
share, the loads at which latency is compared, and the comparability warnings.

`compare_runs(paths)` reads the run folders, `orch bench` result directories or `vllm bench
serve` result files (runs/sources.py `load_source`; and the per-request file of the level each
run's distributions come from); `Comparison.to_json()` is the machine form
(`orch compare --json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.errors import RunFolderError
from orchestrator.report.comparability import comparability_warnings
from orchestrator.report.distributions import Distribution, read_distributions
from orchestrator.report.figures import LoadKey, at_throughput, rising_part
from orchestrator.report.series import Series, build_series
from orchestrator.runs.reader import RunData
from orchestrator.runs.sources import load_source

MAX_EQUAL_LOAD_ROWS = 6


@dataclass(frozen=True)
class EqualLoad:
    """One output throughput, and which baseline level reached it."""

    throughput: float
    level: str


@dataclass(frozen=True)
class Comparison:
    series: list[Series]
    warnings: list[str]
    distributions: list[Distribution] = field(default_factory=list)  # see distributions.py

    @property
    def baseline(self) -> Series:
        return self.series[0]

    @property
    def loads(self) -> list[LoadKey]:
        keys = {p.key for s in self.series for p in s.points}
        return sorted(keys, key=lambda k: (k[0] != "c", k[1]))

    @property
    def model_time(self) -> list[Series]:
        return [s for s in self.series if s.model_time]

    def equal_loads(self) -> list[EqualLoad]:
        """The baseline's throughputs on the rising part of its curve that another run also
        spans (so a latency can be interpolated there), at most MAX_EQUAL_LOAD_ROWS."""
        found: list[EqualLoad] = []
        for point in rising_part(self.baseline.points):
            others = [
                s for s in self.series[1:] if at_throughput(s.points, point.output_throughput, "mean_e2el_ms") is not None
            ]
            if others or len(self.series) == 1:
                found.append(EqualLoad(point.output_throughput, point.level))
        if len(found) > MAX_EQUAL_LOAD_ROWS:
            step = (len(found) - 1) / (MAX_EQUAL_LOAD_ROWS - 1)
            found = [found[round(i * step)] for i in range(MAX_EQUAL_LOAD_ROWS)]
        return found

    def one_box(self) -> Series | None:
        """The first run that did not go through vLLM's router, when a fleet is compared."""
        boxes = [s for s in self.series if not s.replicas]
        return boxes[0] if boxes and len(boxes) < len(self.series) else None

    def scaling(self) -> dict[str, float | None]:
        """Each fleet's scaling per replica against the one-box run: fleet peak / (replicas x
        one-box peak); empty unless a fleet and a one-box run are compared."""
        box = self.one_box()
        box_peak = box.peak.output_throughput if box and box.peak else None
        return {s.label: (s.peak.output_throughput / (s.replicas * box_peak)
                          if s.peak and box_peak and s.replicas else None)
                for s in self.series if s.replicas and box is not None}

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline.label,
            "scaling_per_replica": self.scaling(),
            "warnings": self.warnings,
            "series": [_series_json(s) for s in self.series],
            "equal_load": [
                {
                    "throughput": load.throughput,
                    "baseline_level": load.level,
                    "mean_e2el_ms": {s.label: at_throughput(s.points, load.throughput, "mean_e2el_ms") for s in self.series},
                    "mean_itl_ms": {s.label: at_throughput(s.points, load.throughput, "mean_itl_ms") for s in self.series},
                }
                for load in self.equal_loads()
            ],
            "distributions": [
                {"label": d.label, "level": d.level, "basis": d.basis, "requests": len(d.e2el_ms), "failed": d.failed}
                for d in self.distributions
            ],
        }


def _series_json(s: Series) -> dict[str, Any]:
    single, top = s.single_stream, s.peak
    return {
        "label": s.label,
        "run": str(s.run.path),
        "plan": s.run.name,
        "host": s.host.name,
        "status": s.run.status,
        "engine": s.engine,
        "simulated": s.simulated,
        "time_scale": s.time_scale,
        "model_time": s.model_time,
        "model": s.model,
        "gpus": {"count": s.gpus.count, "source": s.gpus.source},
        "single_stream_throughput": single.output_throughput if single else None,
        "peak_throughput": top.output_throughput if top else None,
        "peak_at": top.level if top else None,
        "peak_throughput_per_gpu": s.per_gpu(top.output_throughput if top else None),
        "replicas": s.replicas,  # through vLLM's router (None: one box)
        "knee": s.knee,
        "knee_how": s.knee_how,
        "plateau": s.plateau.to_json(),
        "levels": [asdict(p) for p in s.points],
    }


def compare(runs: Sequence[RunData], *, model_time: bool = True, host: str | None = None) -> Comparison:
    if not runs:
        raise RunFolderError("nothing to compare: give at least one run folder or plan name")
    series = build_series(runs, model_time=model_time, host=host)
    if not series:
        names = ", ".join(str(run.path) for run in runs)
        where = f" for host {host!r}" if host else ""
        raise RunFolderError(
            f"no benchmark results{where} in {names}",
            hint="a run folder holds them under hosts/<host>/bench/level-*.json",
        )
    without = [run for run in runs if not run.benches]
    warnings = [f"{run.name}: no benchmark results in {run.path}; left out" for run in without]
    return Comparison(series, warnings + source_warnings(series) + comparability_warnings(series))


# What a `vllm bench serve` result does not hold, that orch's results do.
VLLM_LACKS = ("it records no prompt, max_tokens, ignore_eos or sampling settings (so they are "
              "not compared), and has no content TTFT (time to the first answer token after "
              "any reasoning), no per-request distribution and no server view (/metrics)")


def source_warnings(series: Sequence[Series]) -> list[str]:
    """What results that are not run folders leave out, said once per series."""
    out = []
    for s in series:
        if s.run.source == "vllm":
            out.append(f"{s.label}: `vllm bench serve` results ({s.run.path}): {VLLM_LACKS}")
    return out


def compare_runs(paths: Sequence[Path], *, model_time: bool = True, host: str | None = None) -> Comparison:
    comparison = compare([load_source(path) for path in paths], model_time=model_time, host=host)
    distributions, problems = read_distributions(comparison.series)
    return replace(comparison, warnings=comparison.warnings + problems, distributions=distributions)
