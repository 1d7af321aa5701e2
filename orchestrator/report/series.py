"""A series: one host's benchmark of one run, with what a comparison needs to know about it
(its figures in model time, the GPUs behind them, the benchmark settings it ran with)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.bench.fleet_table import fleet_replicas
from orchestrator.engines import known
from orchestrator.engines.layout import EngineFlags
from orchestrator.limits.verdicts import Plateau, plan_facts, plateau
from orchestrator.report.figures import (
    DEFAULT_KNEE_THRESHOLD,
    Point,
    knee,
    peak,
    point_of,
    single_stream,
)
from orchestrator.report.gpus import GpuCount, gpu_count
from orchestrator.runs.reader import HostData, RunData


@dataclass(frozen=True)
class Series:
    label: str
    run: RunData
    host: HostData
    points: list[Point]
    model_time: bool  # figures are the simulator's normalized ones
    time_scale: float | None
    simulated: bool
    gpus: GpuCount
    config: dict[str, Any]  # the benchmark settings it ran with
    endpoint_type: str | None
    model: str | None
    knee: int | None
    knee_how: str
    plateau: Plateau  # what held it at the knee, and what to try (plateau_of)
    replicas: int | None = None  # through vLLM's router: how many replicas (None: one box)

    @property
    def engine(self) -> str:
        return self.run.engine or ("sim" if self.simulated else "unknown")

    @property
    def single_stream(self) -> Point | None:
        return single_stream(self.points)

    @property
    def peak(self) -> Point | None:
        return peak(self.points)

    @property
    def settings_recorded(self) -> bool:
        """Whether its prompt, max_tokens and sampling settings are known (a `vllm bench
        serve` result records only the endpoint and the load)."""
        return self.run.source != "vllm"

    def per_gpu(self, value: float | None) -> float | None:
        """Per GPU of the whole run: a fleet's GPUs are a replica's times its replicas."""
        if value is None or not self.gpus.count:
            return None
        return value / (self.gpus.count * (self.replicas or 1))

    def point_at(self, key: tuple[str, float]) -> Point | None:
        return next((p for p in self.points if p.key == key), None)


def plateau_of(run: RunData, host: HostData, knee_at: tuple[int | None, str],
               threshold: float) -> Plateau:
    """Why the run plateaus (limits/verdicts.py), read back from its run folder: the plan's
    `service.args` and the host's facts (topology, GPU count) as the apply saw them, the level
    files' verdicts (judged on reading when a level file predates them), the knee as the
    comparison found it."""
    assert host.bench is not None
    service = run.plan.service if run.plan is not None else None
    args: dict[str, Any] = dict(service.args) if service is not None else {}
    extra = tuple(service.extra_args) if service is not None else ()
    facts = host.facts or {}
    gpus = facts.get("gpus")
    topology = facts.get("topology")
    # The run's engine names the flags; a plan-less bench of an unknown server has none, and
    # the advice then says what to change in words rather than in one engine's flags.
    named = known(service.engine if service is not None else run.engine or "")
    found = plan_facts(args, extra, topology if isinstance(topology, str) else None,
                       len(gpus) if isinstance(gpus, list) else None,
                       flags=named.flags if named is not None else EngineFlags())
    return plateau(host.bench.levels, args, extra, found, threshold, known=knee_at)


def _config(run: RunData, host: HostData) -> dict[str, Any]:
    """The settings the sweep recorded, else the plan's bench section."""
    summary = host.bench.summary if host.bench else None
    if summary is not None and summary.config:
        return summary.config
    if run.plan is not None and run.plan.bench is not None:
        return run.plan.bench.model_dump(mode="json")
    return {}


def _threshold(config: dict[str, Any]) -> float:
    auto = config.get("auto")
    value = auto.get("threshold") if isinstance(auto, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else DEFAULT_KNEE_THRESHOLD


def series_of(run: RunData, host: HostData, label: str, *, model_time: bool = True) -> Series:
    assert host.bench is not None
    bench = host.bench
    normalized = all(level.normalized is not None for level in bench.levels)
    use_model_time = model_time and bench.simulated and normalized
    points = [point_of(level, model_time=use_model_time) for level in bench.levels]
    config = _config(run, host)
    recorded = bench.summary.knee if bench.summary else None
    knee_at, how = knee(points, recorded=recorded, threshold=_threshold(config))
    first = bench.levels[0] if bench.levels else None
    model = (first.model_id if first else None) or (bench.summary.model if bench.summary else None)
    return Series(
        label=label,
        run=run,
        host=host,
        points=points,
        model_time=use_model_time,
        time_scale=bench.time_scale if bench.simulated else None,
        simulated=bench.simulated or run.simulated,
        gpus=_gpus(run, host, bench.simulated or run.simulated),
        config=config,
        endpoint_type=first.endpoint_type if first else None,
        model=model,
        knee=knee_at,
        knee_how=how,
        plateau=plateau_of(run, host, (knee_at, how), _threshold(config)),
        replicas=fleet_replicas(bench.levels),
    )


# Results without a plan or host facts: nobody said how many GPUs served them.
UNRECORDED_GPUS = {"bench": "an `orch bench` result has no plan or host facts",
                   "vllm": "a `vllm bench serve` result has no plan or host facts"}


def _gpus(run: RunData, host: HostData, simulated: bool) -> GpuCount:
    if run.source in UNRECORDED_GPUS:
        return GpuCount(None, UNRECORDED_GPUS[run.source])
    return gpu_count(run.plan, (host.facts or {}).get("gpus"),
                     gpu_host=gpu_host(host.facts, simulated))


def _labels(entries: Sequence[tuple[RunData, HostData]]) -> list[str]:
    """Plan names; the host when a run benchmarked several; the stamp when a name repeats."""
    multi_host = {id(run) for run, _ in entries if len(run.benches) > 1}
    labels = [
        f"{run.name}@{host.name}" if id(run) in multi_host else run.name for run, host in entries
    ]
    repeated = {label for label in labels if labels.count(label) > 1}
    return [
        f"{label} ({run.stamp[:16]})" if label in repeated else label
        for label, (run, _) in zip(labels, entries, strict=True)
    ]


def build_series(runs: Sequence[RunData], *, model_time: bool = True, host: str | None = None) -> list[Series]:
    """Every benchmarked host of every run, in the order given (the first is the baseline)."""
    entries = [
        (run, data) for run in runs for data in run.benches if host is None or data.name == host
    ]
    return [
        series_of(run, data, label, model_time=model_time)
        for (run, data), label in zip(entries, _labels(entries), strict=True)
    ]


def gpu_host(facts: dict[str, Any] | None, simulated: bool) -> bool:
    """Whether GPUs may have served: the simulator declares its own; a real server's host
    facts say `gpus: null` when the probe found no nvidia-smi (runs without facts: unknown,
    so yes)."""
    return simulated or facts is None or "gpus" not in facts or facts["gpus"] is not None
