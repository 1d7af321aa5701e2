"""Tables as data and their two renderers: a fixed-width terminal and HTML."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator import masking
from orchestrator.plan.models import Plan
from orchestrator.report.compare_tables import comparison_tables, with_ratio
from orchestrator.report.comparison import compare
from orchestrator.runs.reader import BenchData, HostData, RunData
from orchestrator.runs.run_records import LevelResult, Meta, SweepSummary
from orchestrator.tables import Column, TableData, split_groups, to_html, to_rich


def render(table: TableData, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(to_rich(table))
    return out.getvalue()


def grouped() -> TableData:
    table = TableData(
        "Throughput by load",
        [Column("C", "right"), Column("a", "right", "tok/s"), Column("b", "right", "tok/s"),
         Column("a", "right", "per GPU"), Column("b", "right", "per GPU")],
        strong={(0, 3)},
    )
    table.add(["1", "61.0", "83.5 (1.37x)", "7.6", "20.9 (2.74x)"])
    return table


def test_split_groups_gives_one_table_per_group_with_the_lead_columns() -> None:
    first, second = split_groups(grouped())
    assert (first.title, second.title) == ("Throughput by load: tok/s", "Throughput by load: per GPU")
    assert [c.header for c in first.columns] == ["C", "a", "b"]
    assert first.rows == [["1", "61.0", "83.5 (1.37x)"]] and second.rows == [["1", "7.6", "20.9 (2.74x)"]]
    assert first.strong == set() and second.strong == {(0, 1)}
    ungrouped = TableData("t", [Column("x")])
    assert split_groups(ungrouped) == [ungrouped]


def test_html_spans_group_headers_escapes_and_masks() -> None:
    masking.register("s3cret-value")
    table = grouped()
    table.add(["<script>alert(1)</script>", "s3cret-value", "", "", ""])
    html = to_html(table)
    assert '<th colspan="1" class="group"></th><th colspan="2" class="group">tok/s</th><th colspan="2" class="group">per GPU</th>' in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "s3cret-value" not in html and "***" in html
    assert '<td class="right"><strong>7.6</strong></td>' in html


def test_terminal_rendering_escapes_markup_and_fits_80_columns() -> None:
    table = TableData("t", [Column("name"), Column("value", "right")])
    table.add(["[bold]not markup[/bold]", "1.0"])
    text = render(table)
    assert "[bold]not markup[/bold]" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_row_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="t: 1 cells for 2 columns"):
        TableData("t", [Column("a"), Column("b")]).add(["x"])


@pytest.mark.parametrize(
    ("value", "base", "is_base", "expected"),
    [(2276.0, 1238.0, False, "2,276.0 (1.84x)"), (1238.0, 1238.0, True, "1,238.0"), (None, 1.0, False, "-"), (5.0, None, False, "5.0"), (5.0, 0.0, False, "5.0")],
)
def test_with_ratio(value: float | None, base: float | None, is_base: bool, expected: str) -> None:
    assert with_ratio(value, base, lambda v: f"{v:,.1f}", is_base=is_base) == expected


def rate_level(rate: float, tok_s: float) -> dict[str, Any]:
    return {"level": f"r{rate:g}", "mode": "rate", "request_rate": rate, "max_concurrency": None,
            "output_throughput": tok_s, "mean_e2el_ms": 900.0, "median_e2el_ms": 850.0, "p99_e2el_ms": 1500.0,
            "mean_ttft_ms": 80.0, "mean_itl_ms": 12.0, "completed": 10, "failed": 0, "flags": []}  # fmt: skip


def test_rate_levels_render_as_requests_per_second() -> None:
    plan = Plan.model_validate({"name": "p", "service": {"model": "m", "args": {"tensor-parallel-size": 2}}})
    bench = BenchData(Path("/r/bench"), [LevelResult.model_validate(rate_level(0.5, 40.0)),
                                         LevelResult.model_validate(rate_level(2.5, 180.0))], SweepSummary())
    run = RunData(Path("/r/p/20260101T000000Z-0"), Meta(plan="p", status="complete"), plan, None,
                  [HostData("h", None, bench)])
    tables = {t.title: t for t in comparison_tables(compare([run]))}
    throughput = tables["Throughput by load"]
    assert throughput.columns[0].header == "Load"
    assert throughput.rows == [["0.5 req/s", "40.0", "20.0"], ["2.5 req/s", "180.0", "90.0"]]
    headline = tables["Headline"].rows[0]
    assert headline == ["p", "-", "180.0", "2.5 req/s", "90.0", "too few levels"]
    assert "Load" in render(throughput)


def test_the_best_run_of_each_row_is_marked() -> None:
    plan = Plan.model_validate({"name": "p", "service": {"model": "m", "args": {"tensor-parallel-size": 2}}})

    def run(name: str, tok_s: float, e2el: float) -> RunData:
        level = {**rate_level(1.0, tok_s), "mean_e2el_ms": e2el, "median_e2el_ms": e2el, "p99_e2el_ms": e2el}
        bench = BenchData(Path(f"/r/{name}/bench"), [LevelResult.model_validate(level)], SweepSummary())
        return RunData(Path(f"/r/{name}/x"), Meta(plan=name, status="complete"), plan, None,
                       [HostData("h", None, bench)])

    tables = {t.title: t for t in comparison_tables(compare([run("a", 100.0, 2000.0), run("b", 150.0, 3000.0)]))}
    throughput, latency = tables["Throughput by load"], tables["Latency by load"]
    assert throughput.rows[0] == ["1 req/s", "100.0", "150.0 (1.50x)", "50.0", "75.0 (1.50x)"]
    assert throughput.strong == {(0, 2), (0, 4)}  # higher throughput wins
    assert latency.strong == {(0, 1), (0, 3)}  # lower latency wins
    assert "<strong>150.0 (1.50x)</strong>" in to_html(throughput)
