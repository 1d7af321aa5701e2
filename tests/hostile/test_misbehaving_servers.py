"""Servers whose metrics misbehave, live on 127.0.0.1 (tests/fixtures/hostile_server.py): the
server's own `/metrics` under `orch bench`, a DCGM exporter under the sampler and under
`orch apply` on a host without nvidia-smi. Garbage, NaN, an error, a body or a line without
end, no answer, a connection closed at once, a trickle, a header block sent a byte at a time:
the benchmark goes on, the level's block says "<whose> at <URL>: <what was wrong>", no scrape
outlasts its bound, nothing is counted from garbage, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.hostile_server import Misbehaviour, hostile_server
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port

from orchestrator.bench.dcgm import DcgmSampler, answers, parse_dcgm
from orchestrator.bench.server_metrics import parse_checked
from orchestrator.limits.evidence import gather
from orchestrator.runs.run_records import LevelResult

pytestmark = pytest.mark.slow  # servers and orch processes: seconds a test

VLLM = ('# HELP vllm:num_requests_running Number of requests running.\n'
        '# TYPE vllm:num_requests_running gauge\n'
        'vllm:num_requests_running{model_name="m"} 1\n'
        'vllm:generation_tokens_total{model_name="m"} 10\n')
VLLM_NOT_COUNTS = ('vllm:num_requests_running{model_name="m"} NaN\n'
                   'vllm:num_requests_waiting{model_name="m"} -4\n'
                   'vllm:generation_tokens_total{model_name="m"} +Inf\n'
                   'vllm:prompt_tokens_total{model_name="m" 12\n')
DCGM = ('# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="H100"} 412.5\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="H100"} 93\n')
DCGM_NOT_READINGS = ('DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="H100"} NaN\n'
                     'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="H100"} -5\n'
                     'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="H100"} +Inf\n'
                     'DCGM_FI_DEV_SM_CLOCK garbage\n')
USAGE = {"prompt_tokens": 3, "completion_tokens": 5}
# fault -> what the block must say about it (after "<whose> at <URL>: ")
FAULTS = {
    "binary": "its answer is not text",
    "html": "it answered an HTML page, not Prometheus text",
    "html-as-text": "its answer is not Prometheus text (it begins '<html>",
    "status-500": "HTTP 500 Internal Server Error",
    "close": "it closed the connection without answering",
    "silent": "no answer within 1 s",
    "slow": "the answer did not end within 1 s",
    "drip": "no whole answer within 2 s (read no further)",  # its header block, a byte at a time
    "endless-line": "a line longer than 64 KiB (read no further)",
    # small pieces without end: the size bound or, on a loaded machine, the clock ends it
    "endless-body": "MiB (read no further)|the answer did not end within 1 s",
}


def _says_one_of(fault: str, problem: str) -> bool:
    return any(one in problem for one in FAULTS[fault].split("|"))


def _said(result: Any) -> str:
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "Exception in thread" not in output, output
    return " ".join(output.split())


# -- the server's /metrics under orch bench --------------------------------------------------

def _bench(tmp_path: Path, how: Misbehaviour) -> tuple[dict[str, Any], float]:
    out = tmp_path / "out"
    with hostile_server(how) as url:
        started = time.monotonic()
        result = orch("bench", "--url", url, "--concurrency", "1", "--requests", "4",
                      "--warmup", "0", "--result-dir", out, cwd=tmp_path, timeout=120)
        took = time.monotonic() - started
    said = _said(result)
    assert result.returncode == 0, said  # the benchmark goes on
    level: dict[str, Any] = json.loads((out / "level-c1.json").read_text())
    assert level["completed"] == 4, level
    return level, took


@pytest.mark.parametrize("fault", FAULTS)
def test_a_metrics_page_that_misbehaves_is_said_and_not_counted(tmp_path: Path, fault: str) -> None:
    level, took = _bench(tmp_path, Misbehaviour(usage=USAGE, metrics=fault, metrics_page=VLLM))
    block = level["server_metrics"]
    assert block["problem"].startswith("server /metrics at http://127.0.0.1:"), block
    assert _says_one_of(fault, block["problem"]), block
    assert block["scrapes"] == 0 and block["source"] == "none", block
    assert not [key for key in block if key.startswith(("max_", "mean_", "delta_"))], block
    # two scrapes (start, stop) of 1 s, twice that with a trickle, and the requests
    assert took < 30, took


def test_values_that_are_not_counts_are_left_out_and_said(tmp_path: Path) -> None:
    level, _ = _bench(tmp_path, Misbehaviour(usage=USAGE, metrics_page=VLLM + VLLM_NOT_COUNTS))
    block = level["server_metrics"]
    assert block["source"] == "vllm" and block["max_running"] == 1.0, block  # the good line
    assert "delta_prompt_tokens" not in block and "max_waiting" not in block, block
    assert block["delta_generation_tokens"] == 0.0  # 10 both times, +Inf never added
    assert "line(s) not counted, not a sample or not a count" in block["problem"], block


def test_a_good_metrics_page_has_no_problem(tmp_path: Path) -> None:
    level, _ = _bench(tmp_path, Misbehaviour(usage=USAGE, metrics_page=VLLM))
    block = level["server_metrics"]
    assert block["source"] == "vllm" and "problem" not in block, block


def test_lines_that_are_not_counts_are_parsed_out() -> None:
    values, rejected = parse_checked((VLLM + VLLM_NOT_COUNTS).splitlines())
    assert values == {"vllm:num_requests_running": 1.0, "vllm:generation_tokens_total": 10.0}
    assert len(rejected) == 4


# -- a DCGM exporter under the sampler -------------------------------------------------------

def _sampled(url: str, seconds: float = 1.5) -> tuple[dict[str, Any], float]:
    sampler = DcgmSampler(url, 0.2)
    started = time.monotonic()
    sampler.start(time.perf_counter_ns())
    time.sleep(seconds)
    sampler.stop()
    took = time.monotonic() - started
    block = sampler.merge([sampler.summarize(sampler.snapshots())])
    assert block is not None
    return block, took


@pytest.mark.parametrize("fault", FAULTS)
def test_an_exporter_that_misbehaves_is_said_and_not_counted(fault: str) -> None:
    with hostile_server(Misbehaviour(metrics=fault, metrics_page=DCGM)) as root:
        url = f"{root}/metrics"
        assert not answers(url)
        block, took = _sampled(url)
    assert block["source"] == "dcgm-exporter" and block["samples"] == 0, block
    assert block["reason"].startswith(f"DCGM exporter at {url}: "), block
    assert _says_one_of(fault, block["reason"]), block
    # 1.5 s of sampling, then one scrape of at most 1 s read in at most 1 s more
    assert took < 1.5 + 2 * 1 + 1.5, took


def test_readings_that_are_not_readings_are_left_out_and_said() -> None:
    with hostile_server(Misbehaviour(metrics_page=DCGM + DCGM_NOT_READINGS)) as root:
        block, _ = _sampled(f"{root}/metrics")
    assert block["samples"] >= 2 and block["mean_power_w"] == 412.5, block  # the good lines
    assert block["max_temp_c"] is None, block  # +Inf never became a temperature
    assert "line(s) not counted" in block["problem"] and "NaN" in block["problem"], block
    values, _ = parse_dcgm(DCGM_NOT_READINGS.splitlines())
    assert values == {}


# -- a DCGM exporter under orch apply, on a host without nvidia-smi -------------------------

@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv for the module's applies (the simulator's orch is installed once)."""
    return tmp_path_factory.mktemp("venv") / "venv"


def _apply(tmp_path: Path, venv: Path, dcgm_port: int) -> tuple[dict[str, Any], str, float]:
    (tmp_path / "i.yaml").write_text("hosts:\n  a: {connection: local}\n")
    plan = tmp_path / "p.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "dcgm", "hosts": "a",
        "python": {"venv": str(venv), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "name": f"dcgm-{tmp_path.name[-12:]}",
                    "sim": {"profile": "tiny-qwen2-vllm-cpu-2-cores", "time_scale": 0.1,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1], "requests_per_level": 4, "warmup": 0, "max_tokens": 16,
                  "gpu_telemetry": "0.2s", "dcgm_port": dcgm_port},
    }))
    try:
        started = time.monotonic()
        result = orch("apply", plan, "-i", tmp_path / "i.yaml", cwd=tmp_path, timeout=300)
        took = time.monotonic() - started
    finally:
        orch("stop", plan, "-i", tmp_path / "i.yaml", cwd=tmp_path)
    said = _said(result)
    assert result.returncode == 0, said
    level = json.loads((last_run(tmp_path) / "hosts/a/bench/level-c1.json").read_text())
    return level["gpu_telemetry"], said, took


def port_of(root: str) -> int:
    return int(root.rsplit(":", 1)[1])


@pytest.mark.parametrize("fault", ["html-as-text", "silent", "close", "endless-body", "drip"])
def test_an_apply_says_what_its_exporter_did(tmp_path: Path, venv: Path, fault: str) -> None:
    with hostile_server(Misbehaviour(metrics=fault, metrics_page=DCGM)) as root:
        block, _, _ = _apply(tmp_path, venv, port_of(root))
    where = f"DCGM exporter at http://127.0.0.1:{port_of(root)}/metrics on a: "
    assert block["source"] == "none", block
    assert block["reason"].startswith("no nvidia-smi on the host; " + where), block
    assert _says_one_of(fault, block["reason"]), block


def test_an_apply_leaves_out_what_is_not_a_reading(tmp_path: Path, venv: Path) -> None:
    with hostile_server(Misbehaviour(metrics_page=DCGM_NOT_READINGS)) as root:
        block, _, _ = _apply(tmp_path, venv, port_of(root))
    assert block["source"] == "dcgm-exporter" and block["samples"] == 0, block
    assert block["reason"].startswith(
        f"DCGM exporter at http://127.0.0.1:{port_of(root)}/metrics on a: "), block
    assert "line(s) not counted" in block["reason"], block


# -- readings that are finite but no GPU's (issue 38, item 15) ------------------------------

def test_impossible_readings_are_left_out_said_once_and_judge_nothing(tmp_path: Path, venv: Path) -> None:
    """The stand-in exporter (tests/fixtures/fake_dcgm_exporter.py) serving 1e308 W, SMs
    active 1e300, PCIe at 1e30 B/s and a GPU labelled by 23 digits, under orch apply."""
    port = free_port()
    exporter = Path(__file__).parents[1] / "fixtures" / "fake_dcgm_exporter.py"
    with subprocess.Popen([sys.executable, str(exporter), str(port), "impossible"],
                          stdout=subprocess.PIPE, text=True) as served:
        assert served.stdout is not None and served.stdout.readline().strip() == "ready"
        try:
            block, said, _ = _apply(tmp_path, venv, port)
        finally:
            served.terminate()
    assert block["source"] == "dcgm-exporter" and block["samples"] >= 1, block
    assert [g["index"] for g in block["gpus"]] == [0, 1], block  # no GPU 12345678901234567890123
    assert "mean_sm_active" not in block and "mean_pcie_rx_mb_s" not in block, block
    assert block["max_power_w"] <= 5000 and block["energy_j"] is not None, block  # GPU 1's alone
    problem = block["problem"]
    assert problem.startswith(f"DCGM exporter at http://127.0.0.1:{port}/metrics on a: "), problem
    assert "reading(s) out of range left out" in problem and problem.count("out of range") == 1
    assert " inf " not in f" {said} " and "1e+308" not in said, said
    level = LevelResult.model_validate_json((last_run(tmp_path) / "hosts/a/bench/level-c1.json").read_text())
    assert level.limiter is not None and level.limiter["name"] != "compute-bound", level.limiter
    # a level file edited to hold them is not judged by them either
    edited = LevelResult.model_validate({**level.model_dump(), "gpu_telemetry": {**block, "mean_sm_active": 1e300}})
    assert edited.extra("gpu_telemetry")["mean_sm_active"] == 1e300 and gather(edited).sm_active is None
