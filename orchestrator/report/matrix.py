"""`orch compare` of a matrix run: its variants side by side, labelled by the values that vary
(not by run ids), and the best variant for the matrix's objective, with the reason.

The best variant has the most output tok/s (per GPU when the GPUs are known) at a level
that meets the objective:

- `matrix.objective` (`p99 TTFT <= 4s at C >= 64`): a level qualifies when it is in the range
  and every condition holds there;
- else the plan's `bench.slo`: the most goodput (requests per second meeting the SLOs);
- else the peak output throughput.

A variant that failed, or that no level of qualifies, is named with why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.bench.level_metrics import slo_is_set
from orchestrator.errors import RunFolderError
from orchestrator.plan.models.objective import Objective, parse_objective
from orchestrator.report.comparability import comparability_warnings
from orchestrator.report.comparison import Comparison
from orchestrator.report.distributions import read_distributions
from orchestrator.report.figures import Point
from orchestrator.report.level_table import MISSING, tok_s
from orchestrator.report.series import Series, build_series
from orchestrator.runs import matrix_file
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.matrix_file import MatrixRecord, VariantEntry
from orchestrator.runs.reader import RunData, load_run, plan_name_of_file
from orchestrator.tables import Column, TableData


@dataclass(frozen=True)
class VariantResult:
    entry: VariantEntry
    series: Series | None
    score: float | None  # what the variants are ranked by (None: it does not qualify)
    at: Point | None  # the level that score was reached at
    reason: str  # why it qualifies, or not
    per_joule: float | None = None  # output tokens per joule at `at`, where telemetry says

    @property
    def label(self) -> str:
        return self.entry.label


@dataclass(frozen=True)
class MatrixComparison:
    folder: Path
    record: MatrixRecord
    comparison: Comparison | None  # None when no variant has benchmark results
    results: list[VariantResult]
    basis: str  # what "best" means here
    unit: str  # of the score
    ranked_at: str  # which level of a variant its score is taken at
    none_reason: str  # what "best: none" means

    @property
    def best(self) -> VariantResult | None:
        ranked = [r for r in self.results if r.score is not None]
        return max(ranked, key=lambda r: r.score or 0.0, default=None)

    def best_line(self) -> str:
        best = self.best
        if best is None:
            return f"best: none; {self.none_reason}"
        others = sorted((r for r in self.results if r is not best and r.score is not None),
                        key=lambda r: -(r.score or 0.0))
        line = f"best for {self.basis}: {best.label}: {best.reason}"
        if others:
            runner = others[0]
            margin = (best.score or 0.0) / runner.score if runner.score else None
            line += (f"; next: {runner.label} ({_score(runner.score, self.unit)}"
                     + (f"; the best has {margin:.2f}x" if margin and margin != 1 else "") + ")")
        return line

    def to_json(self) -> dict[str, Any]:
        best = self.best
        return {
            "matrix": str(self.folder),
            "plan": self.record.plan,
            "status": self.record.status,
            "varying": self.record.varying,
            "basis": self.basis,
            "best": best.label if best else None,
            "best_line": self.best_line(),
            "variants": [{
                "index": r.entry.index, "label": r.label, "values": r.entry.values,
                "status": r.entry.status, "run": r.entry.run, "cause": r.entry.cause,
                "score": r.score, "unit": self.unit, "at": r.at.level if r.at else None,
                "reason": r.reason, "tokens_per_joule": r.per_joule,
            } for r in self.results],
            "comparison": self.comparison.to_json() if self.comparison else None,
        }


def _score(value: float | None, unit: str) -> str:
    if value is None:
        return MISSING
    return f"{value:,.2f} {unit}" if unit == "req/s" else f"{tok_s(value)} {unit}"


def matrix_ref(ref: str, root: Path) -> Path | None:
    """The matrix folder `ref` names: the folder or its matrix.json, or a plan (a name or a
    plan file) whose runs hold a matrix run (its latest). None: not a matrix."""
    path = Path(ref)
    if matrix_file.is_matrix(path):
        return matrix_file.folder_of(path)
    name = ref
    if path.suffix in (".yaml", ".yml") and path.is_file():
        name = plan_name_of_file(path)
    elif path.is_dir():
        name, root = path.name, path.parent
    if "/" in name:
        return None
    found = matrix_file.matrices(root, name)
    return found[-1] if found else None


def _per_joule(series: Series, point: Point) -> float | None:
    """Output tokens per joule at `point`, when the level holds such a figure (GPU energy
    telemetry); the first key naming joules."""
    if series.host.bench is None:
        return None
    for level in series.host.bench.levels:
        if level.level != point.level:
            continue
        for key in list(level.model_extra or {}):
            if "per_joule" in key or key.endswith("_per_j"):
                return level.figure(key)
    return None


def _objective_result(entry: VariantEntry, series: Series, objective: Objective,
                      unit: str) -> VariantResult:
    per_gpu = series.gpus.count is not None
    covered = [p for p in series.points if p.key[0] == "c" and p.completed
               and objective.covers(p.load)]
    if not covered:
        return VariantResult(entry, series, None, None,
                             f"no level at {objective.describe_range()}")
    qualifying = []
    misses: list[str] = []
    for point in sorted(covered, key=lambda p: p.load):
        failed = []
        for condition in objective.conditions:
            value = point.value(condition.key)
            if value is None:
                failed.append(f"no {condition.key}")
            elif not condition.holds(value):
                failed.append(f"{condition.stat} {condition.metric.upper()} {value / 1000:.2f}s")
        if failed:
            misses.append(f"C={point.load:g}: {', '.join(failed)}")
        else:
            qualifying.append(point)
    if not qualifying:
        return VariantResult(entry, series, None, None,
                             f"no level at {objective.describe_range()} meets it ("
                             + "; ".join(misses[:3]) + ("; ..." if len(misses) > 3 else "") + ")")
    top = max(qualifying, key=lambda p: p.output_throughput)
    score = series.per_gpu(top.output_throughput) if per_gpu else top.output_throughput
    held = ", ".join(f"{c.stat} {c.metric.upper()} {(top.value(c.key) or 0) / 1000:.2f}s"
                     for c in objective.conditions)
    per = f" ({tok_s(score or 0)} per GPU)" if per_gpu else ""
    missed = f"; misses it at {misses[-1]}" if misses else ""
    return VariantResult(entry, series, score, top,
                         f"{tok_s(top.output_throughput)} output tok/s{per} at C={top.load:g}, "
                         f"where {held}{missed}", _per_joule(series, top))


def _plain_result(entry: VariantEntry, series: Series, goodput: bool, unit: str) -> VariantResult:
    usable = [p for p in series.points if p.completed]
    if goodput:
        scored = [p for p in usable if p.request_goodput is not None]
        top = max(scored, key=lambda p: p.request_goodput or 0.0, default=None)
        if top is None:
            return VariantResult(entry, series, None, None, "no goodput recorded")
        return VariantResult(entry, series, top.request_goodput, top,
                             f"{top.request_goodput or 0:,.2f} req/s meeting the SLOs at C={top.load:g} "
                             f"({tok_s(top.output_throughput)} output tok/s)", _per_joule(series, top))
    top = series.peak
    if top is None:
        return VariantResult(entry, series, None, None, "no complete level")
    per_gpu = series.gpus.count is not None
    score = series.per_gpu(top.output_throughput) if per_gpu else top.output_throughput
    per = f" ({tok_s(score or 0)} per GPU)" if per_gpu else ""
    return VariantResult(entry, series, score, top,
                         f"peak {tok_s(top.output_throughput)} output tok/s{per} at C={top.load:g}",
                         _per_joule(series, top))


def _variant_run(folder: Path, entry: VariantEntry) -> Path | None:
    """A variant's run folder: beside the matrix folder (whatever the working folder; where
    apply puts it), else where matrix.json says; one found nowhere is said in its row."""
    if not entry.run:
        return None
    for candidate in (folder.parent / Path(entry.run).name, Path(entry.run)):
        if RunLayout(candidate).meta.is_file():
            return candidate
    entry.status, entry.cause = "missing", f"its run folder {entry.run} is not there"
    return None


def _load_variant(folder: Path, entry: VariantEntry) -> RunData | None:
    where = _variant_run(folder, entry)
    if where is None:
        return None
    try:
        return load_run(where)
    except RunFolderError as error:  # said in the variant's row, not left out quietly
        entry.status, entry.cause = "unreadable", str(error).splitlines()[0]
        return None


def _variant_series(with_results: list[tuple[VariantEntry, RunData]], model_time: bool,
                    host: str | None) -> tuple[dict[int, Series], Comparison | None]:
    """Each variant's series under its label, by index, and their comparison (None: none
    has results)."""
    series_by_index: dict[int, Series] = {}
    all_series = []
    for entry, run in with_results:
        found = build_series([run], model_time=model_time, host=host)
        if found:
            labelled = replace(found[0], label=entry.label)
            series_by_index[entry.index] = labelled
            all_series.append(labelled)
    if not all_series:
        return series_by_index, None
    distributions, problems = read_distributions(all_series)
    return series_by_index, Comparison(all_series, comparability_warnings(all_series) + problems,
                                       distributions)


def compare_matrix(folder: Path, *, model_time: bool = True,
                   host: str | None = None) -> MatrixComparison:
    record = matrix_file.read(folder)
    entries = sorted(record.variants, key=lambda v: v.index)
    runs = [(entry, _load_variant(folder, entry)) for entry in entries]
    with_results = [(e, r) for e, r in runs if r is not None and r.benches]
    series_by_index, comparison = _variant_series(with_results, model_time, host)
    objective = parse_objective(record.objective) if record.objective else None
    any_plan = next((r.plan for _, r in with_results if r is not None and r.plan), None)
    slo = any_plan.bench.slo if any_plan is not None and any_plan.bench is not None else None
    goodput = objective is None and slo is not None and slo_is_set(slo)
    per_gpu = all(s.gpus.count is not None for s in series_by_index.values())
    unit = "req/s" if goodput else ("tok/s per GPU" if per_gpu else "tok/s")
    if objective is not None:
        basis = objective.text
        ranked_at = f"at the best level meeting {basis}"
    elif goodput:
        basis = "goodput (bench.slo)"
        ranked_at = "at the level with the most goodput (bench.slo)"
    else:
        basis = "peak throughput (no objective given)"
        ranked_at = "at each variant's peak (no objective given)"
    none_reason = ("no variant has a complete level" if objective is None and not goodput
                   else f"no variant has a level meeting {basis}")
    results = []
    for entry, _ in runs:
        series = series_by_index.get(entry.index)
        if series is None:
            why = f"{entry.status}: {entry.cause}" if entry.status in ("failed", "unreadable", "missing") \
                and entry.cause else \
                f"{entry.status}, no benchmark results"
            results.append(VariantResult(entry, None, None, None, why))
        elif objective is not None:
            results.append(_objective_result(entry, series, objective, unit))
        else:
            results.append(_plain_result(entry, series, goodput, unit))
    return MatrixComparison(folder, record, comparison, results, basis, unit, ranked_at,
                            none_reason)


def reasons(matrix: MatrixComparison) -> list[str]:
    """Why each variant ranks as it does (or not at all), one line each."""
    return [f"{r.entry.index} {r.label}: {r.reason}" for r in matrix.results]


def matrix_table(matrix: MatrixComparison) -> TableData:
    """One row per variant: its status, peak and the figure it is ranked by (`reasons`
    says why)."""
    joules = any(r.per_joule is not None for r in matrix.results)
    columns = [Column("#", "right"), Column("Variant"), Column("Status"),
               Column("Peak (tok/s)", "right"), Column("Peak at", priority=2),
               Column(f"Ranked by ({matrix.unit})", "right")]
    if joules:
        columns.append(Column("tok/J", "right", priority=1))
    table = TableData(f"Matrix {matrix.record.plan}: {matrix.basis}", columns,
                      caption=f"Variants labelled by the values that vary; ranked by "
                              f"{matrix.unit} {matrix.ranked_at}.")
    best = matrix.best
    for result in matrix.results:
        peak = result.series.peak if result.series else None
        row = [str(result.entry.index), result.label, result.entry.status,
               tok_s(peak.output_throughput) if peak else MISSING,
               f"C={peak.load:g}" if peak else MISSING,
               _score(result.score, "").strip() if result.score is not None else MISSING]
        if joules:
            row.append(f"{result.per_joule:.2f}" if result.per_joule is not None else MISSING)
        if result is best:
            table.strong.add((len(table.rows), 1))
        table.add(row)
    return table
