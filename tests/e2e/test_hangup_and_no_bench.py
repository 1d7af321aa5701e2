"""`orch apply` of a simulator plan on this machine: SIGHUP (a closed terminal or ssh session)
in the middle of the benchmark ends it as Ctrl-C would, with the exit code the table lists;
a plan without a benchmark says so once. Real processes, the simulator as the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port
from fixtures.served import generated_tokens

from orchestrator.exit_codes import MEANINGS, ExitCode

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One venv and service name for the module's applies (the venv is made once)."""
    top = tmp_path_factory.mktemp("hangup")
    state = {"dir": top, "port": free_port(), "name": f"hup-{top.name[-10:]}"}
    yield state
    orch("stop", _plan(state, bench=False), cwd=top)


def _plan(state: dict[str, Any], *, bench: bool) -> Path:
    plan: dict[str, Any] = {
        "name": "hangup", "hosts": "localhost",
        "python": {"venv": str(state["dir"] / "venv"), "interpreter": quick_venv.interpreter(),
                   "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": state["port"],
                    "backend": "process", "name": state["name"],
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.5,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "smoke": [],
    }
    if bench:  # long enough to be cut: one stream, many long answers
        plan["bench"] = {"concurrency": [1], "requests_per_level": 50, "warmup": 0,
                         "max_tokens": 512, "ignore_eos": True}
    path = state["dir"] / ("bench.yaml" if bench else "no-bench.yaml")
    path.write_text(yaml.safe_dump(plan))
    return path


def test_a_plan_without_a_benchmark_says_so_once(workdir: dict[str, Any]) -> None:
    result = orch("apply", _plan(workdir, bench=False), cwd=workdir["dir"])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "no benchmark: bench is null" and lines.count(lines[1]) == 1
    assert not (last_run(workdir["dir"]) / "hosts" / "localhost" / "bench").exists()


def test_sighup_during_the_benchmark_exits_129_as_an_interrupt(workdir: dict[str, Any]) -> None:
    plan = _plan(workdir, bench=True)
    before = generated_tokens(workdir["port"])  # the server of the test above, if it ran
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "apply", str(plan)],
                               cwd=workdir["dir"], env={**os.environ, "COLUMNS": "120"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while generated_tokens(workdir["port"]) <= before:  # the benchmark is under way
        assert time.monotonic() < deadline and process.poll() is None, "no benchmark"
        time.sleep(0.1)
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=120)
    said = out + err
    assert process.returncode == ExitCode.HANGUP == 128 + signal.SIGHUP, said
    assert "SIGHUP" in MEANINGS[ExitCode.HANGUP]
    assert "Traceback" not in said and "interrupted (SIGHUP)" in err
    assert f"the service {workdir['name']} keeps running" in " ".join(said.split())
    run = last_run(workdir["dir"])
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
