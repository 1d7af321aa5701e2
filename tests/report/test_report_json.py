"""`--json` of `orch runs` and `orch diff`: the same facts as the tables, as numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runmaker import REPO, Runs

from orchestrator.cli import main

pytestmark = pytest.mark.slow


def _json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> Any:
    assert main(list(argv)) == code
    return json.loads(capsys.readouterr().out)


def _model_tok_s(path: Path) -> float:
    level = json.loads(path.read_text())
    return float(level["output_throughput"] * level["time_scale"])


def test_runs_json_has_every_folder_with_figures_as_numbers(
    runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _json(capsys, "runs", "--runs-dir", str(runs.root), "--json")
    by_path = {row["path"]: row for row in rows}
    folder = runs.sim["kimi-nvfp4"]
    row = by_path[str(folder)]
    bench = folder / "hosts" / "localhost" / "bench"
    assert row["plan"] == "sim-kimi-nvfp4" and row["status"] == "complete"
    assert row["engine"] == "sim" and row["hosts"] == ["localhost"]
    assert row["single_stream_tok_s"] == pytest.approx(_model_tok_s(bench / "level-c1.json"))
    peak = max(_model_tok_s(p) for p in bench.glob("level-c*.json"))
    assert row["peak_tok_s"] == pytest.approx(peak) and row["peak_at"].startswith("C=")
    failed = by_path[str(runs.failed)]
    assert failed["status"] == "failed" and failed["peak_tok_s"] is None
    assert [r["run"] for r in rows] == sorted(r["run"] for r in rows)


def test_runs_json_with_no_runs_is_an_empty_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _json(capsys, "runs", "--runs-dir", str(tmp_path), "--json") == []


def test_diff_json_lists_each_change(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = REPO / "plans/sim/kimi-nvfp4.yaml", REPO / "plans/sim/minimax-m2.5.yaml"
    data = _json(capsys, "diff", str(a), str(b), "--json")
    assert (data["a"], data["b"]) == ("sim-kimi-nvfp4", "sim-minimax-m2.5")
    changes = {c["setting"]: c for c in data["changes"]}
    assert changes["service.model"] == {"category": "model", "setting": "service.model",
                                        "before": "nvidia/Kimi-K2.5-NVFP4",
                                        "after": "MiniMaxAI/MiniMax-M2.5"}
    assert all(set(c) == {"category", "setting", "before", "after"} for c in data["changes"])
    same = _json(capsys, "diff", str(a), str(a), "--json", "--exit-code")
    assert same["changes"] == []
