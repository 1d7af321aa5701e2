"""The environment of a run (apply/environment.py): `nvidia-smi -q` read and kept where
nvidia-smi exists, said missing where it does not; vLLM's collect-env run in the plan's venv
in the background, time-boxed, its failure or timeout written down and never fatal. Real
processes over the local transport: a stand-in `nvidia-smi` on the PATH, a real venv whose
`vllm.collect_env` is a stand-in module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.service_plans import make_plan

from orchestrator.apply.environment import EnvironmentCapture
from orchestrator.events import Event, StageEvent
from orchestrator.facts import Facts, HostFacts
from orchestrator.facts.environment import parse_nvidia_smi_q
from orchestrator.runs.environment_record import read_environment
from orchestrator.runs.outcome import HostOutcome
from orchestrator.runs.writer import RunFolder
from orchestrator.service.lock import LockGuard
from orchestrator.transport.local import LocalTransport

SMI_Q = Path(__file__).parents[1] / "fixtures" / "nvidia-smi-q-2x-rtx-pro-6000.txt"


@pytest.mark.parametrize(("text", "expected"), [
    (SMI_Q.read_text(), {"driver_version": "580.95.05", "cuda_version": "13.0",
                         "gpu_names": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 2}),
    ("", {}),
    ("No devices were found\n", {}),
])
def test_nvidia_smi_q_versions(text: str, expected: dict[str, object]) -> None:
    """Parsed from a sample in nvidia-smi 580's `-q` layout (written here, not captured on a GPU)."""
    assert parse_nvidia_smi_q(text) == expected


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A real venv (no pip) whose site-packages hold a stand-in `vllm.collect_env`."""
    path = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next(path.glob("lib/python*/site-packages"))
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "collect_env.py").write_text(
        "import os, sys, time\n"
        "time.sleep(float(os.environ.get('COLLECT_ENV_SLEEP', '0')))\n"
        "print('Collecting environment information...')\n"
        "print('vLLM Version                 : 0.17.1')\n"
        "sys.exit(int(os.environ.get('COLLECT_ENV_EXIT', '0')))\n")
    return path


def _smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f'#!/bin/sh\nif [ "$1" = "-q" ]; then cat "{SMI_Q}"; exit 0; fi\nexit 0\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")


def _capture(tmp_path: Path, venv: Path, timeout: int = 20,
             engine: str = "vllm") -> tuple[dict[str, object], Path, list[Event]]:
    plan = make_plan({"engine": engine}, python={"venv": str(venv)})
    folder = RunFolder.create("env", "0" * 8, root=tmp_path / "runs")
    capture = EnvironmentCapture(plan, folder, timeout=timeout)
    transport, said = LocalTransport("local"), []
    outcome = HostOutcome("local")
    facts = Facts(host=HostFacts())
    capture.start(transport, facts, outcome, said.append, LockGuard(outcome.host))
    capture.finish(transport, facts, outcome, said.append, LockGuard(outcome.host))
    where = folder.host("local").environment
    return read_environment(where).to_json(), where.root, said


def test_nvidia_smi_and_collect_env_are_kept(tmp_path: Path, venv: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _smi_on_path(tmp_path, monkeypatch)
    record, where, said = _capture(tmp_path, venv)
    assert record["nvidia_smi"] == {"captured": True, "file": "nvidia-smi-q.txt",
                                    "driver_version": "580.95.05", "cuda_version": "13.0",
                                    "gpu_names": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 2}
    assert (where / "nvidia-smi-q.txt").read_text() == SMI_Q.read_text()
    env = record["collect_env"]
    assert isinstance(env, dict) and env["captured"] is True and env["file"] == "collect-env.txt"
    assert "vLLM Version                 : 0.17.1" in (where / "collect-env.txt").read_text()
    (event,) = said
    assert isinstance(event, StageEvent) and event.status == "ok"
    assert event.message.startswith("nvidia-smi -q kept (driver 580.95.05, CUDA 13.0); "
                                    "vllm collect-env kept (")


@pytest.mark.slow
def test_without_nvidia_smi_or_in_time_nothing_fails_and_the_folder_says_why(
        tmp_path: Path, venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi on this machine's PATH
    monkeypatch.setenv("COLLECT_ENV_SLEEP", "30")
    record, where, said = _capture(tmp_path, venv, timeout=1)
    assert record["nvidia_smi"] == {"captured": False, "why": "no nvidia-smi on the host's PATH"}
    assert not (where / "nvidia-smi-q.txt").exists()
    env = record["collect_env"]
    assert isinstance(env, dict) and env["captured"] is False
    assert env["why"] == "did not finish within 1 s (best effort; its partial output kept)"
    assert json.loads((where / "environment.json").read_text()) == record
    assert isinstance(said[0], StageEvent) and said[0].status == "ok"


@pytest.mark.slow
def test_a_failing_collect_env_and_a_venv_without_vllm(tmp_path: Path, venv: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLECT_ENV_EXIT", "3")
    record, _, _ = _capture(tmp_path, venv)
    env = record["collect_env"]
    assert isinstance(env, dict) and env["why"] == "exited 3 (its output kept)"
    empty = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(empty)], check=True)
    record, where, _ = _capture(tmp_path / "second", empty)
    assert record["collect_env"] == {"command": "python -m vllm.collect_env (vllm collect-env)",
                                     "timeout_s": 20, "captured": False,
                                     "why": "no vLLM in the venv"}
    assert not (where / "collect-env.txt").exists()


def test_beside_a_server_already_up_collect_env_waits_for_the_sweep_to_end(
        tmp_path: Path, venv: Path) -> None:
    """No start-up to overlap (the service step changed nothing): collect-env would compete
    with the benchmark, so it runs when the stages end."""
    plan = make_plan({"engine": "sim"}, python={"venv": str(venv)}, bench={"concurrency": [1]})
    folder = RunFolder.create("env", "0" * 8, root=tmp_path / "runs")
    capture = EnvironmentCapture(plan, folder)
    transport, said = LocalTransport("local"), []
    outcome, facts = HostOutcome("local"), Facts(host=HostFacts())
    capture.start(transport, facts, outcome, said.append, LockGuard(outcome.host))
    assert not (venv / ".orch" / "environment" / "collect-env.started").exists()
    capture.finish(transport, facts, outcome, said.append, LockGuard(outcome.host))
    env = read_environment(folder.host("local").environment).to_json()["collect_env"]
    assert isinstance(env, dict) and env["captured"] is True


def test_an_engine_without_a_collector_runs_none_and_says_so(tmp_path: Path, venv: Path) -> None:
    """SGLang declares no collector: vLLM's is not run for it (the venv holds one), and the
    output an earlier vLLM run left in the venv's folder is not taken for its own."""
    _capture(tmp_path / "first", venv)  # vLLM's collect-env ran and left its files
    record, where, said = _capture(tmp_path / "second", venv, engine="sglang")
    assert record["collect_env"] == {"command": None, "captured": False,
                                     "why": "no collector for sglang"}
    assert not (where / "collect-env.txt").exists()
    assert isinstance(said[0], StageEvent) and said[0].message.endswith("; no collector for sglang")
