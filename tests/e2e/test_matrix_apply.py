"""`orch apply` of a plan with a matrix, over real processes: the simulator as the server
(process backend) on this machine. Four variants, two of them with an invalid flag value:
the run order groups those sharing a server (the second reuses the first's), the failed ones
are recorded with their cause and do not stop the others, every variant has its own run
folder listed in matrix.json; `orch compare` labels the variants by their values and names
the best. Two variants cut by Ctrl-C in the second: `--resume` keeps the first and finishes
the second in its own folder (its finished levels kept); the server was replaced between
them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import orch
from fixtures.ports import free_port

pytestmark = pytest.mark.slow


def write_plan(tmp_path: Path, matrix: dict[str, Any], *, sim: dict[str, Any],
               bench: dict[str, Any]) -> tuple[Path, int]:
    port = free_port()
    plan = {
        "name": "mx", "hosts": "localhost",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": port,
                    "backend": "process", "name": f"mx-{tmp_path.name[-10:]}", "sim": sim,
                    # a bad flag value fails on its first launch: relaunching it three times
                    # (tests/e2e/test_service_ssh.py tests the budget) was 16 s of the test
                    "restart": {"max_restarts": 0}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": bench,
        "matrix": matrix,
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path, port


def matrix_json(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    found = sorted((tmp_path / "runs" / "mx").glob("matrix-*/matrix.json"))
    assert len(found) == 1, found
    return found[0].parent, json.loads(found[0].read_text())


def server_pid(tmp_path: Path) -> int:
    pidfiles = list((tmp_path / "venv" / ".orch" / "service").glob("*/pid"))
    return int(pidfiles[0].read_text().split()[0])


def test_four_variants_one_failing_flag_value(tmp_path: Path) -> None:
    plan, _ = write_plan(
        tmp_path,
        {"bench.max_tokens": [16, 32], "service.args.max-num-seqs": [4, 0],
         "objective": "p99 TTFT <= 60s"},
        sim={"profile": "instant", "startup_time_scale": 0.001},
        bench={"concurrency": [1, 2], "requests_per_level": 4, "warmup": 0, "max_tokens": 16,
               "ignore_eos": True})
    try:
        planned = orch("plan", plan, cwd=tmp_path)
        said = " ".join(planned.stdout.split())
        assert "Matrix mx: 4 variants, in the order apply runs them" in said, said
        assert "~ --max-num-seqs: 4 -> 0" in said and "~ bench.max_tokens: 16 -> 32" in said
        assert "0 need an install change, 1 only a restart, 2 reuse the server" in said, said
        assert "estimate: no earlier run of mx under runs/" in said

        applied = orch("apply", plan, cwd=tmp_path)
        out = applied.stdout + applied.stderr
        assert applied.returncode == 1, out  # two variants failed; the others ran
        folder, record = matrix_json(tmp_path)
        assert record["status"] == "failed"
        ran = [(v["index"], v["label"], v["status"], v["step"]) for v in record["variants"]]
        assert ran == [
            (1, "max_tokens=16 max-num-seqs=4", "complete", "first"),
            (3, "max_tokens=32 max-num-seqs=4", "complete", "reuse"),
            (2, "max_tokens=16 max-num-seqs=0", "failed", "restart"),
            (4, "max_tokens=32 max-num-seqs=0", "failed", "reuse"),
        ], out
        runs = [Path(tmp_path / v["run"]) for v in record["variants"]]
        assert len(set(runs)) == 4 and all((run / "meta.json").is_file() for run in runs)
        for run, entry in zip(runs, record["variants"], strict=True):
            meta = json.loads((run / "meta.json").read_text())
            assert meta["layers"][-1] == "--set matrix=null"
            assert f"--set service.args.max-num-seqs={entry['values']['service.args.max-num-seqs']}" \
                in meta["layers"]
            levels = sorted(p.name for p in (run / "hosts/localhost/bench").glob("level-*.json"))
            assert levels == (["level-c1.json", "level-c2.json"]
                              if entry["status"] == "complete" else []), run
        failed = record["variants"][2]
        assert failed["cause"].startswith("localhost: ready: the server died"), failed
        assert failed["cause"].endswith("the log says: orch sim serve: error: argument "
                                        "--max-num-seqs: expected a number of at least 1, got 0")
        assert "variant 2 (max_tokens=16 max-num-seqs=0) failed" in " ".join(out.split())

        compared = orch("compare", folder, cwd=tmp_path)
        text = " ".join(compared.stdout.split())
        assert compared.returncode == 0, compared.stdout + compared.stderr
        assert "max_tokens=16 max-num-seqs=4" in text and "max_tokens=32 max-num-seqs=4" in text
        assert "runs/mx/2" not in text.split("Matrix mx:")[-1]  # labels, not run ids
        assert "best for p99 TTFT <= 60s: max_tokens=" in text
        as_json = json.loads(orch("compare", "mx", "--json", cwd=tmp_path).stdout)
        assert as_json["best"] in ("max_tokens=16 max-num-seqs=4", "max_tokens=32 max-num-seqs=4")
        reasons = {v["index"]: v["reason"] for v in as_json["variants"]}
        assert reasons[2].startswith("failed: ") and reasons[4].startswith("failed: ")
    finally:
        orch("stop", plan, cwd=tmp_path)


def test_resume_after_ctrl_c_in_the_second_variant(tmp_path: Path) -> None:
    plan, _ = write_plan(
        tmp_path, {"service.args.max-num-seqs": [4, 8], "objective": "p99 TTFT <= 30s"},
        sim={"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.05,
             "startup_time_scale": 0.001},
        bench={"concurrency": [1, 2, 4], "requests_per_level": 12, "warmup": 0,
               "max_tokens": 64, "ignore_eos": True})
    command = [sys.executable, "-m", "orchestrator.cli", "apply", str(plan)]
    try:
        with subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "COLUMNS": "120"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as first:
            deadline = time.monotonic() + 180
            pids: list[int] = []
            while True:
                assert time.monotonic() < deadline and first.poll() is None, "no second variant"
                found = sorted((tmp_path / "runs" / "mx").glob("matrix-*/matrix.json"))
                record = json.loads(found[0].read_text()) if found else None
                if record and record["variants"][0]["status"] == "running" and not pids \
                        and list((tmp_path / "venv" / ".orch" / "service").glob("*/pid")):
                    pids.append(server_pid(tmp_path))
                second = record["variants"][1] if record else None
                if second and second["run"] and (
                        tmp_path / second["run"] / "hosts/localhost/bench/level-c1.json").exists():
                    break
                time.sleep(0.1)
            pids.append(server_pid(tmp_path))
            first.send_signal(signal.SIGINT)
            output, _ = first.communicate(timeout=120)
        assert first.returncode == 130, output
        assert len(pids) == 2 and pids[0] != pids[1]  # the server was replaced between them
        folder, record = matrix_json(tmp_path)
        assert record["status"] == "interrupted"
        assert [v["status"] for v in record["variants"]] == ["complete", "interrupted"]
        assert "resume it with: orch apply" in " ".join(output.split())
        second_run = tmp_path / record["variants"][1]["run"]
        c1 = (second_run / "hosts/localhost/bench/level-c1.json").read_bytes()

        resumed = orch("apply", plan, "--resume", cwd=tmp_path)
        said = " ".join(resumed.stdout.split())
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"resuming the matrix run in runs/mx/{folder.name}" in said
        assert "variant 1 (max-num-seqs=4): finished before in" in said
        assert f"resuming the run in runs/mx/{second_run.name}" in said
        assert "resumed: c1 finished before, kept as they are" in said
        folder_again, record = matrix_json(tmp_path)
        assert folder_again == folder and record["status"] == "complete"
        assert len(record["resumed"]) == 1
        assert [v["status"] for v in record["variants"]] == ["complete", "complete"]
        assert tmp_path / record["variants"][1]["run"] == second_run  # no new run folder
        assert (second_run / "hosts/localhost/bench/level-c1.json").read_bytes() == c1
        again = orch("apply", plan, "--resume", cwd=tmp_path)
        assert again.returncode == 64 and "no unfinished matrix run" in again.stderr

        compared = orch("compare", plan, cwd=tmp_path)
        text = " ".join(compared.stdout.split())
        assert compared.returncode == 0, compared.stdout + compared.stderr
        assert "max-num-seqs=4" in text and "max-num-seqs=8" in text
        assert "best for p99 TTFT <= 30s: max-num-seqs=" in text
        assert "output tok/s" in text.split("best for")[-1]

        planned = orch("plan", plan, cwd=tmp_path)  # the runs now give an estimate
        said = " ".join(planned.stdout.split())
        assert "estimate: about" in said and "earlier runs of mx" in said, said
    finally:
        orch("stop", plan, cwd=tmp_path)
