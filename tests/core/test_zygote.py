"""The tests' forked `orch` (fixtures/zygote.py) answers as a fresh `python -m orchestrator.cli`:
the same output, exit code, environment, working folder and standard input."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import zygote
from fixtures.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def fresh(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("argv", [
    ["validate", "plans/sim/kimi-nvfp4.yaml", "tests/plan/bad/interpreter-metachars.yaml"],
    ["plan", "plans/sim/kimi-nvfp4.yaml", "--set", "service.port=notaport"],
    ["apply", "--no-such-option"],
    ["--help"],
    ["schema"],
])  # fmt: skip
def test_a_forked_run_says_and_ends_as_a_fresh_one(argv: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "73"}
    forked = zygote.run(argv, cwd=ROOT, env=env, timeout=60, stdin=subprocess.DEVNULL)
    expected = fresh(argv, ROOT, env)
    assert forked.returncode != 0 or argv[0] in ("--help", "schema")
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (expected.returncode, expected.stdout, expected.stderr)


def test_each_run_has_its_own_environment_and_folder(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: p\nhosts: localhost\npython: {venv: /opt/v}\n"
        "env: {TOKEN: '${env:ORCH_ZYGOTE_TEST}'}\nservice: {model: m}\n")
    without = {k: v for k, v in os.environ.items() if k != "ORCH_ZYGOTE_TEST"}
    missing = zygote.run(["plan", "p.yaml"], cwd=tmp_path, env=without, timeout=60)
    assert "1 secret is not set in the environment: ORCH_ZYGOTE_TEST" in missing.stderr
    short = zygote.run(["plan", "p.yaml"], cwd=tmp_path, timeout=60,
                       env={**without, "ORCH_ZYGOTE_TEST": "x"})
    assert "ORCH_ZYGOTE_TEST: a secret shorter than 4 characters" in short.stderr
    again = zygote.run(["plan", "p.yaml"], cwd=tmp_path, env=without, timeout=60)
    assert again.stderr == missing.stderr  # nothing of the last run's environment is left


def test_a_run_past_its_timeout_is_killed() -> None:
    port = free_port()
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run(["sim", "serve", "m", "--port", str(port)], cwd=ROOT, timeout=2)
    assert time.monotonic() - began < 10
