"""Per-request distributions: which level each run's comes from (pure), and the CDFs read
from the requests-<level>.jsonl of real run folders, checked against the files themselves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from inmemory import level, run
from runmaker import Runs

from orchestrator.report.comparison import compare, compare_runs
from orchestrator.report.distributions import HIGHEST, KNEE, cdf, chosen_level, distribution_of
from orchestrator.report.plots import comparison_plots
from orchestrator.report.series import build_series
from orchestrator.runs.reader import read_requests

pytestmark = pytest.mark.slow

PIVOTS = ("kimi-nvfp4", "minimax-m2.5", "kimi-int4")


@pytest.mark.parametrize(
    ("levels", "knee", "expected"),
    [
        ([level(1), level(2), level(4)], 2, ("c2", KNEE)),
        ([level(1), level(2), level(4)], None, ("c4", HIGHEST)),  # still rising: the highest
        ([level(1), level(2), level(4)], 3, ("c4", HIGHEST)),  # a knee between levels: nothing measured there
        ([level(1), level(2), level(4, partial=True)], None, ("c2", HIGHEST)),  # complete before cut short
        ([level(1), level(2), level(4, completed=0, failed=4)], None, ("c2", HIGHEST)),  # nothing finished at 4
    ],
)
def test_the_level_is_the_knee_else_the_highest(levels: list[dict[str, Any]], knee: int | None, expected: tuple[str, str]) -> None:
    (series,) = build_series([run("a", levels=levels, knee=knee)])
    chosen = chosen_level(series)
    assert chosen is not None and (chosen[0].level, chosen[1]) == expected


def test_cdf_steps_to_one() -> None:
    assert cdf([3.0, 1.0, 2.0, 2.0]) == ([1.0, 2.0, 2.0, 3.0], [0.25, 0.5, 0.75, 1.0])


def test_a_comparison_without_files_has_no_distribution() -> None:
    assert compare([run("a")]).distributions == []  # in memory: nothing read


def rows(run_folder: Path, label: str) -> list[dict[str, Any]]:
    path = run_folder / "hosts" / "localhost" / "bench" / f"requests-{label}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_distributions_come_from_each_runs_requests_in_model_time(runs: Runs) -> None:
    comparison = compare_runs([runs.sim[name] for name in PIVOTS])
    assert [d.label for d in comparison.distributions] == [f"sim-{name}" for name in PIVOTS]
    for d, s in zip(comparison.distributions, comparison.series, strict=True):
        chosen = chosen_level(s)
        assert chosen is not None and d.level == chosen[0].level and d.basis == chosen[1]
        assert d.title == f"{s.label} at C={chosen[0].load:g} ({chosen[1]})"
        measured = [r for r in rows(s.run.path, d.level) if not r["warmup"] and r["ok"]]
        scale = 0.005  # the session's time scale: the JSONL holds wall-clock figures
        assert d.ttft_ms == pytest.approx(sorted(r["ttft_ms"] / scale for r in measured))
        assert d.e2el_ms == pytest.approx(sorted(r["e2el_ms"] / scale for r in measured))
        assert d.failed == 0 and len(d.e2el_ms) == chosen[0].completed
    wall = compare_runs([runs.sim["kimi-int4"]], model_time=False).distributions[0]
    assert wall.e2el_ms == pytest.approx(sorted(r["e2el_ms"] for r in rows(runs.sim["kimi-int4"], wall.level)))
    cdf_plot = next(p for p in comparison_plots(comparison) if p.name == "cdf")
    assert cdf_plot.wide and cdf_plot.png.startswith(b"\x89PNG")


def test_failed_requests_are_counted_and_left_out(runs: Runs) -> None:
    comparison = compare_runs([runs.crashed])
    (d,) = comparison.distributions
    # c4 was cut short by the crash: never chosen. c2 is, as the highest whole level, unless
    # a loaded machine put its 2 requests below c1's 1 (a knee at c1 then: these are tiny)
    assert (d.level, d.basis) in (("c2", HIGHEST), ("c1", KNEE))
    series = comparison.series[0]
    assert series.host.bench is not None
    cut_short = series.point_at(("c", 4.0))
    assert cut_short is not None and cut_short.partial and cut_short.failed
    at_crash = distribution_of(series, cut_short, HIGHEST, read_requests(series.host.bench.directory, "c4"))
    written = rows(runs.crashed, "c4")
    assert at_crash.failed == sum(not r["ok"] for r in written) == cut_short.failed
    assert len(at_crash.e2el_ms) == sum(r["ok"] for r in written) == cut_short.completed


def test_an_unreadable_request_file_is_a_warning_not_a_failure(runs: Runs, tmp_path: Path) -> None:
    copy = tmp_path / "sim-kimi-int4" / runs.sim["kimi-int4"].name
    shutil.copytree(runs.sim["kimi-int4"], copy)
    (d,) = compare_runs([copy]).distributions
    path = copy / "hosts" / "localhost" / "bench" / f"requests-{d.level}.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    comparison = compare_runs([copy])
    assert comparison.distributions == []
    problem = next(w for w in comparison.warnings if "no per-request distribution" in w)
    lines = len(path.read_text().splitlines())
    assert problem.startswith(f"sim-kimi-int4: no per-request distribution: {path}: line {lines}: ")
    path.unlink()  # a missing file: no distribution and nothing to say
    assert compare_runs([copy]).distributions == [] and not [w for w in compare_runs([copy]).warnings if "per-request" in w]
