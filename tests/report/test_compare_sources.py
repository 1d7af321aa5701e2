"""`orch compare` and `orch report` of results that are not run folders, through the CLI:
`orch bench` result directories (made here against the simulator) and `vllm bench serve
--save-result` files (vllm_results/: made by vLLM 0.32.0's own client against llama.cpp's
server, see make_vllm_results.py), beside each other and beside run folders. Expected
figures are read from the result files themselves."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.orchcli import orch
from runmaker import Runs

from orchestrator.sim.testing import DEFAULT_MODEL, running_simulator

pytestmark = pytest.mark.slow
VLLM = Path(__file__).resolve().parent / "vllm_results"
ACCEPTED = ("hint: give a run folder (meta.json), a plan name or plan file, an `orch bench` "
            "result directory (level-*.json, summary.json), or `vllm bench serve "
            "--save-result` JSON files (one file, or a directory of them)")


def vllm_file(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VLLM / name).read_text())
    return data


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Two `orch bench` result directories of one simulator: one run with `--label fast`,
    one without a label (named by its folder)."""
    top = tmp_path_factory.mktemp("benches")
    with running_simulator(time_scale=0.05, startup_time_scale=0.001) as sim:
        for name, extra in (("labelled", ["--label", "fast"]), ("bench-b", [])):
            done = orch("bench", "--url", sim.base_url, "--model", DEFAULT_MODEL, "--concurrency",
                        "1,4", "--num-prompts", "8", "--num-warmups", "0", "--max-tokens", "32",
                        "--result-dir", top / name, *extra, cwd=top)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    yield top / "labelled", top / "bench-b"


def compare_json(*refs: str | Path, cwd: Path) -> dict[str, Any]:
    done = orch("compare", *refs, "--json", cwd=cwd)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def level(series: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lv for lv in series["levels"] if lv["level"] == name)


def test_two_orch_bench_directories_compare(benches: tuple[Path, Path], tmp_path: Path) -> None:
    labelled, plain = benches
    data = compare_json(labelled, plain, cwd=tmp_path)
    assert [s["label"] for s in data["series"]] == ["fast", "bench-b"]
    for series, folder in zip(data["series"], benches, strict=True):
        assert series["run"] == str(folder) and series["simulated"] is True
        assert series["status"] == "complete" and series["model"] == DEFAULT_MODEL
        assert series["gpus"] == {"count": None,
                                  "source": "an `orch bench` result has no plan or host facts"}
        written = json.loads((folder / "level-c4.json").read_text())
        assert level(series, "c4")["output_throughput"] == pytest.approx(
            written["normalized"]["output_throughput"])  # model time, as for a simulated run
    done = orch("compare", labelled, plain, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Why it plateaus" in done.stdout and "Throughput by load" in done.stdout
    assert "fast: " in done.stdout and "bench-b: " in done.stdout  # a plateau line each
    assert "GPU count unknown (an `orch bench` result has no plan or host facts)" in done.stdout


def test_an_orch_bench_directory_beside_a_run_folder(benches: tuple[Path, Path], runs: Runs,
                                                     tmp_path: Path) -> None:
    labelled, _ = benches
    run = runs.sim["kimi-nvfp4"]
    data = compare_json(run, labelled, cwd=tmp_path)
    assert [s["label"] for s in data["series"]] == ["sim-kimi-nvfp4", "fast"]
    assert data["series"][0]["gpus"]["count"] == 8  # the run folder keeps its plan's figures
    assert any("max_tokens differs" in w for w in data["warnings"])  # 32 asked here
    report = orch("report", run, labelled, "-o", tmp_path / "page.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "fast" in (tmp_path / "page.html").read_text()


def test_vllm_bench_serve_files_beside_an_orch_bench_directory(benches: tuple[Path, Path],
                                                                tmp_path: Path) -> None:
    labelled, _ = benches
    data = compare_json(labelled, VLLM, cwd=tmp_path)
    ours, theirs = data["series"]
    assert ours["label"] == "fast"
    assert theirs["label"] == "vllm_results" and theirs["run"] == str(VLLM)
    assert [lv["level"] for lv in theirs["levels"]] == ["c1", "c4", "r8"]  # .pytorch.json passed over
    for name, file in (("c1", "vllm-c1.json"), ("c4", "vllm-c4.json"), ("r8", "vllm-r8.json")):
        written = vllm_file(file)
        got = level(theirs, name)
        assert got["output_throughput"] == pytest.approx(written["output_throughput"])
        assert got["mean_ttft_ms"] == pytest.approx(written["mean_ttft_ms"])
        assert got["percentiles"]["p99_ttft_ms"] == pytest.approx(written["p99_ttft_ms"])
        assert got["percentiles"]["p50_ttft_ms"] == pytest.approx(written["median_ttft_ms"])
        assert got["percentiles"]["p99_itl_ms"] == pytest.approx(written["p99_itl_ms"])
        assert got["completed"] == written["completed"]
    assert level(theirs, "r8")["mode"] == "rate" and level(theirs, "c4")["mode"] == "closed"
    assert theirs["model"] == vllm_file("vllm-c1.json")["model_id"]
    warnings = data["warnings"]
    said = [w for w in warnings if w.startswith("vllm_results: `vllm bench serve` results")]
    assert len(said) == 1 and "no content TTFT" in said[0] and "not compared" in said[0]
    assert not any("max_tokens differs" in w or "the prompt differs" in w for w in warnings)
    assert not any("the endpoint differs" in w for w in warnings)  # both chat
    assert any(w.startswith("simulated against real") for w in warnings)
    done = orch("compare", labelled, VLLM, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Why it plateaus" in done.stdout and "vllm_results: " in done.stdout
    assert "warning: vllm_results: `vllm bench serve` results" in " ".join(done.stdout.split())


def test_one_vllm_file_and_an_appended_file_beside_a_run(runs: Runs, tmp_path: Path) -> None:
    appended = tmp_path / "both.json"  # --append-result: one object per line
    appended.write_text("\n".join((VLLM / name).read_text().strip()
                                  for name in ("vllm-c1.json", "vllm-c4.json")))
    data = compare_json(runs.real, VLLM / "vllm-c4.json", appended, cwd=tmp_path)
    assert [s["label"] for s in data["series"]] == ["kimi-nvfp4", "vllm-c4", "both"]
    assert [lv["level"] for lv in data["series"][1]["levels"]] == ["c4"]
    assert [lv["level"] for lv in data["series"][2]["levels"]] == ["c1", "c4"]
    assert not any("the engine differs" in w for w in data["warnings"])  # vLLM's: not said
    report = orch("report", runs.real, VLLM, "-o", tmp_path / "page.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr


def test_a_vllm_label_names_the_series(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    for name in ("vllm-c1.json", "vllm-c4.json"):
        data = vllm_file(name)
        data["label"] = "h100-tp2"  # `vllm bench serve --label h100-tp2`
        (folder / name).write_text(json.dumps(data))
    data = compare_json(folder, cwd=tmp_path)
    assert data["series"][0]["label"] == "h100-tp2"


def test_two_results_for_one_load_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "twice"
    folder.mkdir()
    shutil.copy(VLLM / "vllm-c4.json", folder / "a.json")
    shutil.copy(VLLM / "vllm-c4.json", folder / "b.json")
    done = orch("compare", folder, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {folder}: two results for load c4 (a.json and b.json)")


@pytest.mark.parametrize(
    ("files", "ref", "says"),
    [
        ({"notes/a.txt": "x", "notes/b.csv": "y"}, "notes",
         "error: notes: not a run or benchmark result: found a directory holding a.txt, b.csv"),
        ({"empty/.keep": ""}, "empty",
         "error: empty: not a run or benchmark result: found a directory holding .keep"),
        ({"sweep.csv": "a,b\n"}, "sweep.csv",
         "error: sweep.csv: not a run or benchmark result: found a file that is neither a plan "
         "(.yaml) nor a JSON result (.csv)"),
        ({"other.json": '{"name": "x", "value": 1}'}, "other.json",
         "error: other.json: not a `vllm bench serve` result: it lacks date, backend, model_id, "
         "num_prompts, request_rate, max_concurrency, duration, completed, output_throughput "
         "(its keys: name, value)"),
        ({"list.json": "[1, 2]"}, "list.json",
         "error: list.json: not a `vllm bench serve` result: found a JSON list, expected an object"),
        ({"broken.json": "{oops"}, "broken.json",
         "error: broken.json: not valid JSON (line 1, column 2: Expecting property name "
         "enclosed in double quotes)"),
    ],
)
def test_anything_else_is_named_with_what_is_accepted(tmp_path: Path, files: dict[str, str],
                                                      ref: str, says: str) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    done = orch("compare", ref, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(says), done.stderr
    assert ACCEPTED in done.stderr and "Traceback" not in done.stderr
