"""Per-request distributions: each run's TTFT and end-to-end latency, request by request, at
one level (its knee when that level was measured, else its highest load), read from the
level's requests-<label>.jsonl.

Percentiles say where a few points of a distribution lie; the whole distribution (a CDF)
shows its shape: a long tail, two populations (requests admitted at once and requests that
queued), a cliff. Warm-ups and failed requests are left out, as in every latency figure;
simulated runs are shown in model time like the rest of the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import RunFolderError
from orchestrator.report.figures import Point, concurrency_points
from orchestrator.report.series import Series
from orchestrator.runs.reader import read_requests
from orchestrator.runs.run_records import RequestRow

KNEE, HIGHEST = "knee", "highest level"


@dataclass(frozen=True)
class Distribution:
    label: str  # the run
    level: str  # "c128"
    where: str  # "C=128" or "4 req/s"
    basis: str  # KNEE or HIGHEST
    ttft_ms: list[float]  # ascending
    e2el_ms: list[float]  # ascending
    failed: int  # left out

    @property
    def title(self) -> str:
        """`sim-kimi-nvfp4 at C=128 (knee)`."""
        return f"{self.label} at {self.where} ({self.basis})"


def chosen_level(s: Series) -> tuple[Point, str] | None:
    """The level a run's distributions come from, and why: its knee when the knee is a
    level it measured, else its highest load (complete levels before a cut-short one)."""
    if s.knee is not None:
        at_knee = s.point_at(("c", float(s.knee)))
        if at_knee is not None and at_knee.completed:
            return at_knee, KNEE
    candidates = concurrency_points(s.points) or [p for p in s.points if p.completed]
    whole = [p for p in candidates if not p.partial] or candidates
    if not whole:
        return None
    return max(whole, key=lambda p: p.load), HIGHEST


def distribution_of(s: Series, point: Point, basis: str, rows: Sequence[RequestRow]) -> Distribution:
    """The measured, successful requests of `rows`, in the series' time (model time when the
    comparison uses it: the JSONL holds wall-clock figures)."""
    scale = s.time_scale if s.model_time and s.time_scale else 1.0
    measured = [r for r in rows if not r.warmup]
    ok = [r for r in measured if r.ok]
    where = f"C={point.load:g}" if point.key[0] == "c" else f"{point.load:g} req/s"
    return Distribution(
        label=s.label,
        level=point.level,
        where=where,
        basis=basis,
        ttft_ms=sorted(r.ttft_ms / scale for r in ok if r.ttft_ms is not None),
        e2el_ms=sorted(r.e2el_ms / scale for r in ok if r.e2el_ms is not None),
        failed=len(measured) - len(ok),
    )


def read_distributions(series: Sequence[Series]) -> tuple[list[Distribution], list[str]]:
    """Each series' distribution (the I/O edge: one JSONL per run), and a sentence for each
    run whose requests could not be read."""
    found: list[Distribution] = []
    problems: list[str] = []
    for s in series:
        chosen = chosen_level(s)
        if chosen is None or s.host.bench is None:
            continue
        point, basis = chosen
        try:
            rows = read_requests(s.host.bench.directory, point.level)
        except RunFolderError as error:
            problems.append(f"{s.label}: no per-request distribution: {error}")
            continue
        if rows:
            found.append(distribution_of(s, point, basis, rows))
    return found, problems


def cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Sorted values and the fraction of requests at or below each: the empirical CDF."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered, [(i + 1) / n for i in range(n)]
