"""What a trial's run folder says (reads files; the judging is plain functions): the
objective at the best level meeting the SLO, each SLO metric there, the limiter at the
sweep's plateau and what it says to try; for a trial that did not finish, why (the apply's
diagnosis: the server's own words when it died at start-up).

Figures are in model time, as `orch compare` ranks variants: a simulated run's durations and
rates are the modelled deployment's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import RunFolderError
from orchestrator.plan.models.objective import Condition
from orchestrator.report.figures import Point
from orchestrator.report.series import Series, build_series
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import load_run, read_meta


@dataclass(frozen=True)
class Measured:
    score: float | None  # the objective at the best level meeting the SLO; None: none meets it
    peak: float | None  # the highest output tok/s of any complete level
    best: float | None  # the objective at its highest, SLO or not (what the sampler learns from)
    at: float | None  # the concurrency of the scored level (else of the level shown)
    slo: dict[str, dict[str, Any]]  # `p99_ttft` -> {value_ms, limit_ms, met}
    constraint: float  # above 0: how far the closest level misses the SLO (a fraction)
    limiter: str | None  # `compute-bound at C=128`
    limiter_name: str | None
    suggestions: list[dict[str, list[Any]]] = field(default_factory=list)


def objective_of(point: Point, objective: str) -> float | None:
    if objective == "output_throughput":
        return point.output_throughput
    value = point.throughputs.get(objective)
    return float(value) if value is not None else point.value(objective)


def _miss(point: Point, slo: tuple[Condition, ...]) -> float:
    """How far the level misses the SLO: the worst condition's excess as a fraction of its
    limit (0 or below: every condition holds; no figure counts as a miss)."""
    worst = -1.0
    for condition in slo:
        value = point.value(condition.key)
        excess = 1.0 if value is None else (value - condition.limit_ms) / condition.limit_ms
        if value is not None and excess == 0 and condition.op == "<":
            excess = 1e-9
        worst = max(worst, excess)
    return worst


def judge(series: Series, slo: tuple[Condition, ...], objective: str) -> Measured:
    """The sweep's figures held to the SLO (pure)."""
    points = [p for p in series.points if p.completed and p.key[0] == "c"]
    peak = max((p.output_throughput for p in points), default=None)
    scored = [(objective_of(p, objective), p) for p in points]
    scored = [(v, p) for v, p in scored if v is not None]
    meeting = [(v, p) for v, p in scored if _miss(p, slo) <= 0]
    top = max(meeting, key=lambda vp: vp[0] or 0.0, default=None)
    shown = top[1] if top else min(points, key=lambda p: _miss(p, slo), default=None)
    figures = {}
    for condition in slo:
        value = shown.value(condition.key) if shown else None
        figures[condition.key.removesuffix("_ms")] = {
            "value_ms": value, "limit_ms": condition.limit_ms,
            "met": value is not None and condition.holds(value)}
    verdict = series.plateau.verdict
    knee = series.plateau.knee
    load = knee.at if knee.at is not None else (knee.after[-1][0] if knee.after else None)
    limiter = f"{verdict.name} at C={load}" if verdict and load is not None else \
        (verdict.name if verdict else None)
    return Measured(
        score=top[0] if top else None, peak=peak,
        best=max((v for v, _ in scored if v is not None), default=None),
        at=shown.load if shown else None, slo=figures,
        constraint=min((_miss(p, slo) for p in points), default=1.0),
        limiter=limiter, limiter_name=verdict.name if verdict else None,
        suggestions=[dict(s.matrix) for s in series.plateau.suggestions if s.matrix])


def measure(run: Path, slo: tuple[Condition, ...], objective: str) -> Measured | None:
    """The trial's sweep judged; None when the run has no benchmark results."""
    try:
        found = build_series([load_run(run)], model_time=True)
    except RunFolderError:
        return None
    return judge(found[0], slo, objective) if found else None


def finished(run: Path | None) -> bool:
    """Whether the run's own meta.json says it completed."""
    if run is None or not RunLayout(run).meta.is_file():
        return False
    try:
        return read_meta(run).status == "complete"
    except RunFolderError:
        return False


def cause(run: Path | None) -> str | None:
    """Why a trial's apply did not finish: the diagnosis of the server's death (its cause and
    fix), else the first failed step's error, host by host."""
    if run is None or not RunLayout(run).meta.is_file():
        return None
    try:
        hosts = read_meta(run).hosts
    except RunFolderError:
        return None
    for host in hosts:
        layout = RunLayout(run).host(host)
        said = _diagnosed(layout.diagnosis) or _failed_step(layout.steps)
        if said:  # a host's own error may name it already (`localhost: another apply holds`)
            return said if said.startswith(f"{host}: ") else f"{host}: {said}"
    return None


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _diagnosed(path: Path) -> str | None:
    found = _load(path)
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        return None
    first = found[0]
    return "; ".join(str(first[k]) for k in ("cause", "fix") if first.get(k)) or None


def _failed_step(path: Path) -> str | None:
    found = _load(path)
    if not isinstance(found, dict):
        return None
    for step in found.get("steps") or []:
        if isinstance(step, dict) and step.get("status") == "failed":
            text = str(step.get("error") or "failed").strip().splitlines()
            said = [line.strip() for line in text if line.strip()]
            errors = [line for line in said[1:] if "error" in line.lower()]
            head = said[0] if said else "failed"
            return f"{step.get('step')}: {head}" + (f"; the log says: {errors[-1]}" if errors else "")
    error = found.get("error")
    return str(error).strip().splitlines()[0] if error else None
