"""A sweep survives a server death it cannot explain: the simulator SIGKILLed mid-level (no
log line says why) is relaunched within the restart budget, the interrupted level runs again
from its start (its partial records kept apart) and every level finishes; summary.json says
where it died. A death with a known cause stops the sweep (test_service_ssh.py). Over a real
sshd, with the simulator as the server (process backend)."""

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
from fixtures import quick_venv, zygote
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.ports import free_port
from fixtures.served import generated_tokens
from fixtures.sshd import SshServer

pytestmark = pytest.mark.slow


def test_an_unexplained_death_mid_level_is_relaunched_and_the_sweep_finishes(
        tmp_path: Path, sshd: SshServer) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    port, name, venv = free_port(), f"crash-{tmp_path.name[-8:]}", tmp_path / "venv"
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "crash", "hosts": "all",
        "python": {"venv": str(venv), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": port,
                    "backend": "process", "name": name, "restart": {"max_restarts": 1},
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.05,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 2], "requests_per_level": 24, "warmup": 0,
                  "max_tokens": 64, "ignore_eos": True},
    }))
    env = {**os.environ, "COLUMNS": "120"}
    command = [sys.executable, "-m", "orchestrator.cli", "apply", str(plan), "-i", str(inventory)]
    with subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as apply:
        try:
            deadline = time.monotonic() + 120
            while generated_tokens(port) < 400:  # some of c1's 24 x 64 tokens are out
                assert time.monotonic() < deadline and apply.poll() is None, "no sweep"
                time.sleep(0.05)
            pidfile = venv / ".orch" / "service" / name / "pid"
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
            output, _ = apply.communicate(timeout=180)
        finally:
            zygote.run(["stop", str(plan), "-i", str(inventory)], cwd=tmp_path, timeout=120)
    assert apply.returncode == 0, output
    said = " ".join(output.split())
    assert "the server died during c1 with no known cause; relaunch 1/1, then c1 again from " \
           "its start" in said
    bench = last_run(tmp_path) / "hosts" / "h1" / "bench"
    for label in ("c1", "c2"):  # every level finished, c1 from its start
        level = json.loads((bench / f"level-{label}.json").read_text())
        assert (level["completed"], level["failed"], level["partial"]) == (24, 0, False)
    kept = json.loads((bench / "interrupted-1-level-c1.json").read_text())
    assert kept["partial"] is True  # the records of the attempt the server died in
    summary = json.loads((bench / "summary.json").read_text())
    assert summary["crash"] == {"level": "c1", "cause": None, "relaunched": 1}
    assert [row["level"] for row in summary["levels"]] == ["c1", "c2"]
    compared = orch("compare", str(last_run(tmp_path)), cwd=tmp_path)
    assert "the server died during c1 with no known cause; relaunched 1 time(s), c1 ran " \
           "again from its start" in " ".join(compared.stdout.split()), compared.stdout
