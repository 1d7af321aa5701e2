"""Level files (level-<label>.json) across orch versions: the files in level_files/ were
written by the orch before level results were typed from compose on (commit 1690ade; the
`caseN` ones from compose_cases.yaml's cases, `old-` by hand as an older orch wrote one,
keys since added left out). They must still load, compare and be written back byte for
byte, and compose must still write them key for key (the date aside)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from level_cases import CASES, compose_case
from rich.console import Console

from orchestrator.bench.results import csv_columns, render_csv
from orchestrator.bench.table import render_table
from orchestrator.report.comparison import compare_runs
from orchestrator.runs.layout import BenchLayout
from orchestrator.runs.reader import load_bench, read_record
from orchestrator.runs.run_records import LevelResult, RepeatResult
from orchestrator.runs.writer import RunFolder, write_level
from orchestrator.tables import to_rich

FILES = Path(__file__).parent / "level_files"
OLD = sorted(FILES.glob("*.json"))
DATE = re.compile(r'"date": "[0-9-]+"')


def _written(result: LevelResult, tmp_path: Path) -> str:
    bench = BenchLayout(tmp_path / "bench")
    write_level(bench, result, [])
    return bench.level(result.level).read_text()


@pytest.mark.parametrize("path", OLD, ids=[p.name for p in OLD])
def test_a_level_file_reads_and_writes_back_byte_for_byte(path: Path, tmp_path: Path) -> None:
    result = read_record(path, LevelResult)
    assert result.completed >= 1 and result.repeats
    assert all(isinstance(repeat, RepeatResult) for repeat in result.repeats)
    assert _written(result, tmp_path) == path.read_text()


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_compose_writes_the_level_file_as_before(index: int, tmp_path: Path) -> None:
    (expected,) = FILES.glob(f"case{index}-level-*.json")
    result = compose_case(CASES[index]).result
    assert all(isinstance(repeat, RepeatResult) for repeat in result.repeats)
    text = _written(result, tmp_path)
    assert DATE.sub('"date": "20260101-000000"', text, count=1) == expected.read_text()


def test_old_level_files_make_a_table_a_csv_and_a_comparison(tmp_path: Path) -> None:
    folder = RunFolder.create("old", "0" * 12, root=tmp_path / "runs", hosts=["gpu1"])
    bench = folder.host("gpu1").bench
    for name in ("case0-level-c2.json", "case2-level-c1.json", "case5-level-r2.json",
                 "old-level-c4.json"):
        bench.root.mkdir(parents=True, exist_ok=True)
        shutil.copy(FILES / name, bench.root / name.split("-", 1)[1])
    folder.finish("complete")
    data = load_bench(bench.root)
    assert data is not None
    assert [level.level for level in data.levels] == ["c1", "c2", "c4", "r2"]
    console = Console(width=160, record=True, color_system=None)
    console.print(to_rich(render_table(data.levels, title="old"), 160))
    table = console.export_text()
    assert "2.0 req/s" in table and "4.0" in table  # loads, throughputs
    rows = render_csv(data.levels, csv_columns()).splitlines()
    assert [row.split(",")[0] for row in rows] == ["level", "c1", "c2", "c4", "r2"]
    comparison = compare_runs([folder.path]).to_json()
    (series,) = comparison["series"]
    assert [level["level"] for level in series["levels"]] == ["c1", "c2", "c4", "r2"]
    # written before verdicts: judged on reading, from what the files hold
    plateau = series["plateau"]
    assert plateau["says"] and set(plateau["levels"]) <= {"c1", "c2", "c4"}
    assert all("limiter" not in json.loads(p.read_text()) for p in bench.root.glob("level-*.json"))
    assert json.loads((bench.root / "level-c4.json").read_text())["repeats"][0]["an_old_figure"] == 1.5
