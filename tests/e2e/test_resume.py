"""`orch apply PLAN --resume` continues an interrupted run in its own folder: the service still
running is reused, the levels that finished are kept byte for byte, the level that was cut
runs again (its partial records kept apart) and the rest run; the folder ends as one run.
Interrupted by Ctrl-C, and by kill -9 of orch itself (its host lock then goes with it).
Over a real sshd, with the simulator as the server (process backend)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.background import Background
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.ports import free_port
from fixtures.served import generated_tokens
from fixtures.sshd import SshServer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_an_interrupted_run_is_finished_in_place(tmp_path: Path, sshd: SshServer,
                                                 stop: signal.Signals) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    port, name = free_port(), f"resume-{tmp_path.name[-8:]}"
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "resume", "hosts": "all",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": port,
                    "backend": "process", "name": name,
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.05,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 2, 4], "requests_per_level": 12, "warmup": 0,
                  "max_tokens": 64, "ignore_eos": True},
    }))
    command = [sys.executable, "-m", "orchestrator.cli", "apply", str(plan), "-i", str(inventory)]
    try:
        with subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "COLUMNS": "120"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as first:
            deadline = time.monotonic() + 120
            # c1 done and its file written (a loaded client writes it after the server's last
            # token), c2 under way
            while generated_tokens(port) < 12 * 64 + 200 or \
                    not any(tmp_path.glob("runs/*/*/hosts/h1/bench/level-c1.json")):
                assert time.monotonic() < deadline and first.poll() is None, "no sweep"
                time.sleep(0.05)
            first.send_signal(stop)
            first.communicate(timeout=120)
        run = last_run(tmp_path)
        bench = run / "hosts" / "h1" / "bench"
        c1 = (bench / "level-c1.json").read_bytes()
        c1_written = (bench / "level-c1.json").stat().st_mtime_ns
        assert json.loads((run / "meta.json").read_text())["status"] != "complete"
        listed = " ".join(orch("runs", cwd=tmp_path).stdout.split())
        assert "(resumable)" in listed and "--resume" in listed  # orch runs says how

        resumed = orch("apply", plan, "-i", inventory, "--resume", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        said = " ".join(resumed.stdout.split())
        assert f"resuming the run in runs/resume/{run.name}" in said
        assert "resumed: c1 finished before, kept as they are" in said
        assert last_run(tmp_path) == run  # no new run folder
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "complete" and len(meta["resumed"]) == 1
        assert (bench / "level-c1.json").read_bytes() == c1  # untouched
        assert (bench / "level-c1.json").stat().st_mtime_ns == c1_written
        for label in ("c2", "c4"):
            level = json.loads((bench / f"level-{label}.json").read_text())
            assert (level["completed"], level["partial"]) == (12, False)
        if stop == signal.SIGINT:  # Ctrl-C writes the cut level as partial; kill -9 cannot
            assert json.loads((bench / "interrupted-1-level-c2.json").read_text())["partial"]
        summary = json.loads((bench / "summary.json").read_text())
        assert [row["level"] for row in summary["levels"]] == ["c1", "c2", "c4"]
        again = orch("apply", plan, "-i", inventory, "--resume", cwd=tmp_path)
        assert again.returncode == 64 and "no unfinished run" in again.stdout + again.stderr
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path)


def _local_plan(tmp: Path, *, slow_start: float) -> tuple[Path, str]:
    """A simulator service on this machine (process backend, local connection): the plan,
    the service name (whose host-wide files `_forget` removes)."""
    port, name = free_port(), f"resume-{tmp.name[-8:]}-{os.getpid()}"
    plan = tmp / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "resume", "hosts": "localhost",
        "python": {"venv": str(tmp / "venv"), "interpreter": quick_venv.interpreter(),
                   "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": port,
                    "backend": "process", "name": name,
                    "sim": {"time_scale": 0.003, "slow_start": slow_start}},
        "health": {"startup_timeout": "120s", "poll_interval": "0.2s"}, "smoke": [],
        "bench": {"concurrency": [1], "requests_per_level": 2, "warmup": 0, "max_tokens": 16}}))
    return plan, name


def _forget(plan: Path, name: str) -> None:
    orch("stop", plan, "--break-lock", cwd=plan.parent)
    for made in (Path.home() / ".orch" / "services" / name,
                 Path.home() / ".orch" / "locks" / f"service-{name}-localhost.lock"):
        made.unlink(missing_ok=True)


def _records(run: Path) -> dict[str, bytes]:
    return {name: (run / name).read_bytes() for name in ("meta.json", "plan.yaml", "apply.lock")}


def test_a_run_another_apply_writes_is_not_resumed_nor_touched(tmp_path: Path) -> None:
    """`--resume` of the run an apply is still writing: refused (exit 75) naming that apply,
    before a byte of the run changes; that apply ends with the plan it ran."""
    plan, name = _local_plan(tmp_path, slow_start=60.0)
    first = Background("apply", plan, cwd=tmp_path)
    try:
        first.wait_for("startup")  # its run folder written, its start-up under way
        run = last_run(tmp_path)
        before = _records(run)
        second = orch("apply", plan, "--resume", run, "--set", "bench.max_tokens=8",
                      cwd=tmp_path)
        said = " ".join((second.stdout + second.stderr).split())
        assert second.returncode == 75, said
        assert f"another apply is writing the run folder {run}" in said
        assert f"(pid {first.process.pid}, `orch apply`" in said
        assert _records(run) == before  # not a byte of it changed
    finally:
        _forget(plan, name)
        first.end()
    assert "max_tokens: 16" in (run / "plan.yaml").read_text()


def test_a_run_is_resumed_only_with_the_plan_it_ran(tmp_path: Path) -> None:
    """A plan changed since the run (`--set bench.max_tokens=8`): refused (exit 64) naming
    each difference; nothing of the run is written."""
    plan, name = _local_plan(tmp_path, slow_start=60.0)
    first = Background("apply", plan, cwd=tmp_path)
    try:
        first.wait_for("startup")
        first.process.send_signal(signal.SIGINT)
        assert first.end() == 130, first.said
        run = last_run(tmp_path)
        before = _records(run)
        changed = orch("apply", plan, "--resume", run, "--set", "bench.max_tokens=8",
                       cwd=tmp_path)
        said = " ".join((changed.stdout + changed.stderr).split())
        assert changed.returncode == 64, said
        assert f"--resume {run}: the plan changed since that run" in said
        assert "bench.max_tokens: 16 -> 8" in said and "Traceback" not in said
        assert _records(run) == before
    finally:
        _forget(plan, name)


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_matrix_run_another_apply_runs_is_not_resumed_nor_touched(tmp_path: Path) -> None:
    """The same for a matrix run: its matrix.json is not rewritten beside the apply running it."""
    plan, name = _local_plan(tmp_path, slow_start=60.0)
    data = yaml.safe_load(plan.read_text())
    plan.write_text(yaml.safe_dump({**data, "matrix": {"bench.max_tokens": [16, 32]}}))
    first = Background("apply", plan, cwd=tmp_path)
    try:
        first.wait_for("startup")
        (matrix,) = (tmp_path / "runs" / "resume").glob("matrix-*")
        before = _files(matrix)
        second = orch("apply", plan, "--resume", matrix, cwd=tmp_path)
        said = " ".join((second.stdout + second.stderr).split())
        assert second.returncode == 75, said
        assert f"another apply is writing the run folder {matrix}" in said
        assert f"(pid {first.process.pid}, `orch apply`" in said
        assert _files(matrix) == before  # not a byte of it changed
    finally:
        _forget(plan, name)
        first.end()
