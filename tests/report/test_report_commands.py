"""`orch runs`, `orch compare` and `orch diff` on real run folders (simulated pivots and a
non-simulated run, see conftest.py). Expected figures are read from the level files
independently of the report code."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fixtures import zygote
from PIL import Image
from rich.console import Console
from runmaker import Runs

from orchestrator.cli import main
from orchestrator.errors import RunFolderError
from orchestrator.report.comparability import CAPPED, FLAG_MEANINGS
from orchestrator.report.compare_tables import comparison_tables
from orchestrator.report.comparison import compare_runs
from orchestrator.tables import to_rich

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PIVOTS = ("kimi-nvfp4", "minimax-m2.5", "kimi-int4")
GPUS = {"kimi-nvfp4": 8, "minimax-m2.5": 4, "kimi-int4": 8}


def levels(run: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for path in (run / "hosts" / "localhost" / "bench").glob("level-*.json"):
        data = json.loads(path.read_text())
        out[data["max_concurrency"]] = data
    return out


def model_tok_s(level: dict[str, Any]) -> float:
    """Output throughput in model time, as the bench wrote it (raw x time scale)."""
    return float(level["output_throughput"] * level["time_scale"])


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(list(argv)) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_runs_lists_every_folder_with_its_headline(runs: Runs, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["runs", "--runs-dir", str(runs.root)]) == 0
    out = capsys.readouterr().out

    def cells(folder: Path) -> list[str]:
        line = next(line for line in out.splitlines() if folder.name in line)
        return line.split()

    for name in PIVOTS:
        folder = runs.sim[name]
        one = levels(folder)[1]
        peak = max(levels(folder).values(), key=model_tok_s)
        assert cells(folder) == [
            f"sim-{name}", folder.name, "complete", "sim", f"{model_tok_s(one):,.1f}",
            f"{model_tok_s(peak):,.1f}", "at", f"C={peak['max_concurrency']}", "localhost",
        ]  # fmt: skip
    real = cells(runs.real)
    assert real[:4] == ["kimi-nvfp4", runs.real.name, "complete", "vllm"]
    assert cells(runs.failed) == ["sim-kimi-nvfp4", runs.failed.name, "failed", "(resumable)", "sim",
                                  "-", "-", "localhost"]
    assert "`orch apply PLAN --resume RUN_FOLDER` finishes the run" in " ".join(out.split())
    folders = [line.split()[1] for line in out.splitlines() if line.strip().startswith(("sim-", "kimi-"))]
    assert folders == sorted(folders)  # oldest first


def test_runs_shows_an_unreadable_folder_and_goes_on(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    root = tmp_path / "runs"
    good = root / "sim-kimi-int4" / runs.sim["kimi-int4"].name
    bad = root / "broken" / "20260101T000000Z-deadbeef"
    shutil.copytree(runs.sim["kimi-int4"], good)
    bad.mkdir(parents=True)
    (bad / "meta.json").write_text("{not json")
    assert main(["runs", "--runs-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "unreadable" in out and good.name in out
    assert f"{bad / 'meta.json'}" in out.replace("\n", "")


def test_compare_by_plan_name_takes_the_latest_complete_run(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    names = [f"sim-{name}" for name in PIVOTS]
    data = cli_json(capsys, "compare", *names, "--runs-dir", str(runs.root), "--json")
    assert data["baseline"] == "sim-kimi-nvfp4"
    for series, name in zip(data["series"], PIVOTS, strict=True):
        assert series["run"] == str(runs.sim[name])  # not the newer failed run of kimi-nvfp4
        assert series["simulated"] and series["model_time"] and series["time_scale"] == 0.005
        assert series["gpus"] == {"count": GPUS[name], "source": f"plan: TP {GPUS[name]}"}
        measured = levels(runs.sim[name])
        for point in series["levels"]:
            assert point["output_throughput"] == pytest.approx(model_tok_s(measured[int(point["load"])]))
        assert series["single_stream_throughput"] == pytest.approx(model_tok_s(measured[1]))
        peak = max(model_tok_s(level) for level in measured.values())
        assert series["peak_throughput"] == pytest.approx(peak)
        assert series["peak_throughput_per_gpu"] == pytest.approx(peak / GPUS[name])
    assert not [w for w in data["warnings"] if " differs (" in w or "simulated against real" in w]


def test_compare_warns_when_runs_are_not_comparable(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "compare", str(runs.sim["kimi-nvfp4"]), str(runs.real), "--json")
    warnings = data["warnings"]
    assert any(w.startswith("simulated against real: sim-kimi-nvfp4 ran on the simulator, kimi-nvfp4 on real hardware") for w in warnings)
    assert any(w.startswith("max_tokens differs (sim-kimi-nvfp4 1024, kimi-nvfp4 128)") for w in warnings)
    real = data["series"][1]
    assert not real["simulated"] and not real["model_time"]
    assert real["gpus"] == {"count": 8, "source": "plan: TP 8"}
    measured = levels(runs.real)
    for point in real["levels"]:  # wall time: the raw figures
        assert point["output_throughput"] == pytest.approx(measured[int(point["load"])]["output_throughput"])


def test_compare_tables_render_ratios_to_the_baseline(runs: Runs) -> None:
    comparison = compare_runs([runs.sim[name] for name in PIVOTS])
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for table in comparison_tables(comparison):
        console.print(to_rich(table))
    text = out.getvalue()
    for title in ("Runs", "Headline", "Throughput by load", "Latency by load", "Latency at equal load"):
        assert title in text
    base, other = levels(runs.sim["kimi-nvfp4"]), levels(runs.sim["minimax-m2.5"])
    throughput_rows = text.split("Throughput by load")[1].split("Latency by load")[0]
    for c in (1, 2, 4, 8):
        factor = model_tok_s(other[c]) / model_tok_s(base[c])
        per_gpu_factor = (model_tok_s(other[c]) / 4) / (model_tok_s(base[c]) / 8)
        row = next(line for line in throughput_rows.splitlines() if line.startswith("│") and line.split("│")[1].strip() == str(c))
        assert f"{model_tok_s(other[c]):,.1f} ({factor:.2f}x)" in row
        assert f"({per_gpu_factor:.2f}x)" in row
    assert "sim (simulated, time scale 0.005)" in text


def test_compare_resolves_a_plan_file_and_writes_plots(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plots = tmp_path / "plots"
    plan_file = str(REPO / "plans/sim/kimi-nvfp4.yaml")
    data = cli_json(capsys, "compare", plan_file, "sim-kimi-int4", "--runs-dir", str(runs.root), "--plots", str(plots), "--json")
    assert [s["run"] for s in data["series"]] == [str(runs.sim["kimi-nvfp4"]), str(runs.sim["kimi-int4"])]
    assert sorted(p.name for p in plots.iterdir()) == [
        "cdf.png", "itl.png", "latency.png", "server.png", "throughput.png", "timeline.png", "ttft.png"]
    wide = {"cdf.png", "itl.png", "server.png", "timeline.png", "ttft.png"}  # a row of panels
    for path in plots.iterdir():
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size == ((1540, 462) if path.name in wide else (770, 462))
            colours = {rgb for _, rgb in image.convert("RGB").getcolors(maxcolors=1 << 20) or []}
        assert (0x00, 0x72, 0xB2) in colours and (0xD5, 0x5E, 0x00) in colours  # one line per run


def test_compare_prints_tables_then_notes_and_warnings(runs: Runs, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["compare", str(runs.sim["kimi-nvfp4"]), str(runs.real)]) == 0
    out = capsys.readouterr().out
    assert out.index("Headline") < out.index("Ratios: against sim-kimi-nvfp4 (the baseline, given first); bold: the best run of the row.")
    assert "Simulated at time scale 0.005: sim-kimi-nvfp4. Figures in model time (durations / 0.005, throughputs x 0.005)" in out
    assert "warning: simulated against real: sim-kimi-nvfp4 ran on the simulator" in out


def test_compare_warns_when_the_runs_swept_different_ranges(runs: Runs, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["compare", str(runs.sim["kimi-nvfp4"]), str(runs.varied)]) == 0
    out = capsys.readouterr().out
    assert (
        "warning: the runs swept different load ranges (sim-kimi-nvfp4 C=1..8, sim-minimax-varied C=1..16): "
        "each peak and knee is the best found within its own range"
    ) in out
    for title in ("Time to first token by load: P50 TTFT (ms)", "Inter-token latency by load: P99 ITL (ms)",
                  "Requests by load: finish reasons", "Requests by load: goodput (req/s)"):  # fmt: skip
        assert title in out


KNOWN = "hint: give a run folder path or one of the plans with runs: kimi-nvfp4, sim-kimi-int4, sim-kimi-nvfp4, sim-minimax-m2.5"


@pytest.mark.parametrize(
    ("argv", "message", "hint"),
    [
        (["compare", "nope"], "error: no run folder or plan named 'nope' under", KNOWN),
        (["compare", "sim-kimi-int4", "./missing-run"], "error: ./missing-run: no such run folder or plan file", ""),
        (["report", "nope"], "error: no run folder or plan named 'nope' under", KNOWN),
        (["diff", "nope", "sim-kimi-int4"], "error: no run folder or plan named 'nope' under", KNOWN),
    ],
)
def test_bad_references_are_one_clear_error(runs: Runs, argv: list[str], message: str, hint: str) -> None:
    done = zygote.run([*argv, "--runs-dir", str(runs.root)], timeout=60, cwd=REPO)
    assert done.returncode == 1
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr
    assert hint in done.stderr


def test_a_run_without_results_cannot_be_compared(runs: Runs) -> None:
    with pytest.raises(RunFolderError) as caught:
        compare_runs([runs.failed])
    assert str(caught.value) == (
        f"no benchmark results in {runs.failed}\n  hint: a run folder holds them under hosts/<host>/bench/level-*.json"
    )


def test_diff_a_run_folder_against_a_plan_file(runs: Runs, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["diff", str(runs.real), str(REPO / "plans/sim/kimi-nvfp4.yaml")]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[2].strip(): [c.strip() for c in line.split("│")[3:5]] for line in out.splitlines() if line.startswith("│")}
    assert rows["service.engine"] == ["vllm", "sim"]
    assert rows["vllm"] == ["0.17.1", "(unset)"]
    assert rows["bench.max_tokens"] == ["128", "1024"]
    assert f"kimi-nvfp4 ({runs.real.name})" in out
    assert main(["diff", "sim-kimi-int4", "sim-kimi-int4", "--runs-dir", str(runs.root), "--exit-code"]) == 0
    assert main(["diff", "sim-kimi-int4", "sim-minimax-m2.5", "--runs-dir", str(runs.root), "--exit-code"]) == 2  # the plans differ (ExitCode.CHANGES)


def test_a_plan_folder_means_its_latest_complete_run(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "compare", str(runs.root / "sim-kimi-nvfp4"), "--json")
    assert [s["run"] for s in data["series"]] == [str(runs.sim["kimi-nvfp4"])]
    # only the run's own level flags, which a loaded machine can raise (the simulator's
    # sweep runs beside the suite's other worker): nothing about comparing unlike runs
    measured = (*FLAG_MEANINGS.values(), CAPPED)
    assert data["warnings"] == [w for w in data["warnings"] if w.endswith(measured)]


def test_an_sglang_run_is_reported_per_its_own_gpus(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real run as SGLang would have run it (`tp-size: 8`, its plan.yaml's engine): counted
    as 8 GPUs in SGLang's own flag (vLLM's names read it as 1, its per-GPU figures 8x too
    high), and its plateau advised in SGLang's flags."""
    folder = tmp_path / "runs" / "kimi-nvfp4" / runs.real.name
    shutil.copytree(runs.real, folder)
    plan = folder / "plan.yaml"
    text = plan.read_text().replace("engine: vllm", "engine: sglang")
    plan.write_text(text.replace("tensor-parallel-size: 8", "tp-size: 8"))
    assert "engine: sglang" in plan.read_text() and "tp-size: 8" in plan.read_text()
    top = max(levels(folder).values(), key=lambda level: level["max_concurrency"])
    capped = {"name": "scheduler-cap", "confidence": "high", "why": "requests waited",
              "figures": {"max_running": 64.0}}  # as the sweep's judge would have recorded it
    path = folder / "hosts" / "localhost" / "bench" / f"level-c{top['max_concurrency']}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "limiter": capped}))
    (series,) = cli_json(capsys, "compare", str(folder), "--json")["series"]
    assert series["gpus"] == {"count": 8, "source": "plan: TP 8"}
    assert series["peak_throughput_per_gpu"] == pytest.approx(series["peak_throughput"] / 8)
    assert [s["matrix"] for s in series["plateau"]["try"]] == [
        {"service.args.max-running-requests": [128, 256]}]
