"""The limiter named through real parts: a plan whose max-num-seqs is below the concurrency
applied to the simulator (scheduler-cap, from the server's own gauges and the plan's flag;
the `orch plan` command it suggests runs as printed), and orch's load generator slowed on
purpose, as `cpulimit` does (SIGSTOP/SIGCONT of its process), named client-bound and not blamed
on the server, while the same sweep unslowed is not."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures.orchcli import last_run, orch
from fixtures.sshd import free_port

from orchestrator.sim.testing import running_simulator

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "sim" / "kimi-nvfp4.yaml"


def level(folder: Path, label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / f"level-{label}.json").read_text())
    return data


def test_max_num_seqs_below_the_concurrency_is_named_scheduler_cap(tmp_path: Path) -> None:
    sets = ["--set", "service.args.max-num-seqs=4", "--set", f"service.port={free_port()}",
            "--set", f"service.name=orch-limits-{tmp_path.name[-8:]}",
            "--set", "service.sim.startup_time_scale=0.001", "--set", "smoke=[]",
            "--set", "bench.concurrency=[2,16]", "--set", "bench.requests_per_level=48",
            "--set", "bench.max_tokens=96", "--set", "bench.metrics_interval=0.2s"]
    try:
        applied = orch("apply", PLAN, *sets, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    finally:
        orch("stop", PLAN, *sets, cwd=tmp_path)
    run = last_run(tmp_path)
    bench = run / "hosts" / "localhost" / "bench"
    c16 = level(bench, "c16")["limiter"]
    assert (c16["name"], c16["confidence"]) == ("scheduler-cap", "high"), c16
    assert c16["figures"]["max_num_seqs"] == 4 and c16["figures"]["max_running"] == 4
    assert c16["figures"]["max_waiting"] > 0
    assert level(bench, "c2")["limiter"]["name"] != "scheduler-cap"  # 2 ran at once: no cap met
    plateau = json.loads((bench / "summary.json").read_text())["plateau"]
    assert plateau["levels"]["c16"] == "scheduler-cap"
    assert plateau["try"][0]["matrix"] == {"service.args.max-num-seqs": [8, 16]}
    said = applied.stdout
    assert "scheduler-cap" in said and "Why it plateaus:" in said
    # the suggestion as printed runs as it is: orch plan of the run's resolved plan + the matrix
    line = next(x for x in said.splitlines() if x.strip().startswith("orch plan "))
    words = shlex.split(line.strip())
    preview = orch(*words[1:], cwd=tmp_path)
    assert preview.returncode == 0, preview.stdout[-2000:] + preview.stderr[-2000:]
    assert "max-num-seqs" in preview.stdout and "variant" in preview.stdout.lower(), preview.stdout
    compared = orch("compare", run, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "Why it plateaus" in compared.stdout and "scheduler-cap" in compared.stdout


def _duty_cycle(pid: int, done: threading.Event, stopped_s: float = 0.04, running_s: float = 0.01) -> None:
    """Let the process run `running_s` of every `stopped_s + running_s` (cpulimit's way)."""
    while not done.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stopped_s)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep(running_s)


def _bench(url: str, out: Path, slowed: bool) -> dict[str, Any]:
    argv = [sys.executable, "-m", "orchestrator.cli", "bench", "--url", url, "--concurrency", "8",
            "--num-prompts", "32", "--max-tokens", "64", "--out", str(out)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as bench:
        done = threading.Event()
        limiter = threading.Thread(target=_duty_cycle, args=(bench.pid, done), daemon=True)
        if slowed:
            limiter.start()
        try:
            said, _ = bench.communicate(timeout=240)
        finally:
            done.set()
            if slowed:
                limiter.join()
                os.kill(bench.pid, signal.SIGCONT) if bench.poll() is None else None
    assert bench.returncode == 0, said[-3000:]
    return level(out, "c8")


def test_a_slowed_load_generator_is_named_client_bound_never_the_server(tmp_path: Path) -> None:
    with running_simulator(time_scale=0.05, startup_time_scale=0.001) as sim:
        free = _bench(sim.base_url, tmp_path / "free", slowed=False)
        slowed = _bench(sim.base_url, tmp_path / "slowed", slowed=True)
    assert free["limiter"]["name"] != "client-bound", free["limiter"]
    assert slowed["limiter"]["name"] == "client-bound", slowed["limiter"]
    lag = slowed["limiter"]["figures"]["client_loop_lag_ms"]
    assert lag >= 10 > free["client_loop_lag_ms"]["median"]
    assert "client-bound" in slowed["limiter"]["why"] or "late" in slowed["limiter"]["why"]
