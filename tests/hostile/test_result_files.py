"""Result files and labels as hostile input (issue 38, items 14 and 16), through the real
CLI: a matrix whose values are matplotlib mathtext (`$\\frac{a}{b}$`, `$x^$`) applied for
real, then reported and plotted; `vllm bench serve` result files nested 50,000 deep or
holding 1e308, Infinity and a 5000-digit number, compared and reported; a model listing of
more files than orch takes, from a hub of the test's own and from a record on the host."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import orch
from fixtures.ports import free_port

pytestmark = pytest.mark.slow  # orch processes, a simulator

# typeset by matplotlib if not escaped, and a pair it cannot parse (a ValueError at draw time)
MATH = ["$\\frac{a}{b}$", "$x^$"]


def _said(done: object) -> str:
    return str(getattr(done, "stdout", "")) + str(getattr(done, "stderr", ""))


@pytest.fixture(scope="module")
def mathtext_matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real matrix run of two variants whose env value is mathtext."""
    tmp_path = tmp_path_factory.mktemp("mathtext")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "mx", "hosts": "localhost",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(),
                   "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "name": f"mx-{tmp_path.name[-10:]}",
                    "sim": {"profile": "instant", "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 2], "requests_per_level": 4, "warmup": 0, "max_tokens": 8},
        "matrix": {"env.NOTE": MATH},
    }, sort_keys=False))
    try:
        applied = orch("apply", plan, cwd=tmp_path)
        assert applied.returncode == 0, _said(applied)
    finally:
        orch("stop", plan, cwd=tmp_path)
    return tmp_path


def test_mathtext_in_a_matrix_value_is_plotted_as_written(mathtext_matrix: Path) -> None:
    report = mathtext_matrix / "report.html"
    done = orch("report", "mx", "-o", report, cwd=mathtext_matrix)
    assert done.returncode == 0, _said(done)
    assert "Traceback" not in _said(done)
    html = report.read_text()
    assert "$\\frac{a}{b}$" in html and "data:image/png" in html
    plots = mathtext_matrix / "plots"
    compared = orch("compare", "mx", "--plots", plots, cwd=mathtext_matrix)
    assert compared.returncode == 0, _said(compared)
    assert "Traceback" not in _said(compared)
    assert sorted(p.name for p in plots.glob("*.png")) and (plots / "throughput.png").stat().st_size > 0


# -- result files: depth and figures ---------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
VLLM_RESULT = ROOT / "tests/report/vllm_results/vllm-c4.json"
ORCH_LEVEL = ROOT / "tests/bench/level_files/old-level-c4.json"


def _vllm(**changes: object) -> str:
    data = json.loads(VLLM_RESULT.read_text())
    return json.dumps({**data, **changes}, indent=2)


# name -> (file text, what the error must say, at which line:column)
HOSTILE_RESULTS = {
    "nested 50,000 deep": ('{"date": "x", "a": ' + "[" * 50_000 + "]" * 50_000 + "}",
                           "nested deeper than 64 levels", "1:83"),
    "1e308": (_vllm(output_throughput=1e308), "1e+308 is not a figure orch can use", None),
    "Infinity": (_vllm(p99_ttft_ms=1e308).replace("1e+308", "Infinity"),
                 "Infinity is not a figure orch can use", None),
    "a 5000-digit count": (_vllm(completed=7).replace('"completed": 7', '"completed": ' + "9" * 5000),
                           "(5000 digits) is not a figure orch can use", None),
}


@pytest.mark.parametrize("name", HOSTILE_RESULTS)
@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_hostile_vllm_result_is_refused_where_it_is_wrong(tmp_path: Path, name: str,
                                                            command: str) -> None:
    text, says, at = HOSTILE_RESULTS[name]
    (tmp_path / "result.json").write_text(text)
    args = ["-o", tmp_path / "r.html"] if command == "report" else []
    done = orch(command, "result.json", *args, cwd=tmp_path, timeout=120)
    assert done.returncode == 1, _said(done)
    assert "Traceback" not in _said(done)
    line = done.stderr.splitlines()[0]
    assert line.startswith("error: result.json:") and says in line, done.stderr
    assert at is None or line.startswith(f"error: result.json:{at}: "), line
    assert "expected" in line
    assert not (tmp_path / "r.html").exists()


def test_a_level_file_of_an_orch_bench_folder_is_held_to_the_same(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    level = json.loads(ORCH_LEVEL.read_text())
    level["mean_ttft_ms"] = 1e308
    (folder / "level-c4.json").write_text(json.dumps(level, indent=2))
    for args in (["compare", "bench"], ["report", "bench", "-o", tmp_path / "r.html"]):
        done = orch(*args, cwd=tmp_path, timeout=120)
        assert done.returncode == 1 and "Traceback" not in _said(done), _said(done)
        assert done.stderr.startswith("error: bench/level-c4.json:"), done.stderr
        assert "1e+308 is not a figure orch can use" in done.stderr


def test_a_plain_result_still_reads(tmp_path: Path) -> None:
    shutil.copy(VLLM_RESULT, tmp_path / "result.json")
    done = orch("compare", "result.json", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, _said(done)


# -- a model listing of too many files --------------------------------------------------------

COMMIT = "a" * 40
MANY = 10_001  # over the cap (facts/model_trust.py MODEL_MAX_FILES), as a 300,000-file listing is


def _listing(count: int) -> bytes:
    return json.dumps({"id": "orch/many", "modelId": "orch/many", "sha": COMMIT, "private": False,
                       "siblings": [{"rfilename": f"f{i}.json", "size": 2, "blobId": "b" * 40}
                                    for i in range(count)]}).encode()


@pytest.fixture
def many_files_hub() -> Iterator[str]:
    """A hub of the test's own that lists MANY files for any model (huggingface_hub's
    model_info reads it as it is)."""
    body = _listing(MANY)

    class Listing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Listing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


def _model_plan(tmp_path: Path, **model: str) -> Path:
    # the test's own venv has the real huggingface_hub the host side runs
    plan = {"name": "many", "python": {"venv": sys.prefix, "installer": "pip"},
            "model": {"repo": "orch/many", "dir": str(tmp_path / "model"), **model}}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    return tmp_path / "plan.yaml"


def test_a_hub_listing_too_many_files_is_refused_with_a_word(tmp_path: Path, many_files_hub: str) -> None:
    done = orch("plan", _model_plan(tmp_path, endpoint=many_files_hub), cwd=tmp_path, timeout=120)
    said = " ".join(_said(done).split())
    assert done.returncode == 1 and "Traceback" not in said, said
    assert f"the hub lists {MANY} files for this revision, more than orch takes from one model (10000)" in said


def test_a_record_on_the_host_listing_too_many_files_is_refused_too(tmp_path: Path) -> None:
    """The host's own record of a pinned commit (no hub asked): the controller's cap."""
    record = tmp_path / "model" / ".cache" / "orch" / "model.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"commit": COMMIT, "files": [
        {"path": f"f{i}.json", "size": 2, "blob": "b" * 40} for i in range(MANY)]}))
    done = orch("plan", _model_plan(tmp_path, revision=COMMIT), cwd=tmp_path, timeout=120)
    said = " ".join(_said(done).split())
    assert done.returncode == 1 and "Traceback" not in said, said
    assert f"the listing holds {MANY} files, more than orch takes from one model (10000)" in said


def test_a_per_request_line_with_an_infinite_ttft_is_left_out_and_said(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    shutil.copy(ORCH_LEVEL, folder / "level-c4.json")
    good = {"level": "c4", "request_id": "r1", "ok": True, "ttft_ms": 12.5, "e2el_ms": 80.0,
            "output_tokens": 16}
    lines = [json.dumps(good), json.dumps({**good, "request_id": "r2"}).replace("12.5", "Infinity")]
    (folder / "requests-c4.jsonl").write_text("\n".join(lines) + "\n")
    done = orch("report", "bench", "-o", tmp_path / "r.html", cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "Traceback" not in _said(done), _said(done)
    html = " ".join((tmp_path / "r.html").read_text().split())
    assert "no per-request distribution: bench/requests-c4.jsonl: line 2: ttft_ms: inf is not a figure" in html
