"""The building blocks against the real simulator process (`orch sim serve`): a rendered launch
spec started through its environment file, phases from its log, diagnosis of its injected
crashes, smoke checks over its HTTP API."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fixtures.service_plans import make_plan

from orchestrator.apply.smoke import run_smoke
from orchestrator.engines.vllm.phases import ORDER, PhaseTracker
from orchestrator.plan.models import SmokeCheck
from orchestrator.server_client import ServerClient
from orchestrator.service.diagnosis import diagnose
from orchestrator.service.launch import render_env_file, render_launch

pytestmark = pytest.mark.slow  # servers and orch processes: seconds a test

testing = pytest.importorskip("orchestrator.sim.testing", reason="the simulator has not landed")

ISSUE_SMOKE = [
    {"name": "reasoning", "prompt": "Why is the sky blue?", "thinking": True,
     "expect": {"reasoning": "present", "content_regex": "(?i)scatter"}},
    {"name": "code", "prompt": "Write a Python function add(a, b).",
     "expect": {"python_function": {"name": "add", "calls": [{"args": [2, 3], "returns": 5}]}}},
]  # fmt: skip


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The sim plan rendered to argv + env file, started the way the process backend would:
    a shell sources the mode-0600 environment file and execs the argv."""
    port = testing.free_port()
    plan = make_plan(
        {"engine": "sim", "model": "nvidia/Kimi-K2.5-NVFP4", "host": "127.0.0.1", "port": port,
         "served_model_name": ["kimi-k2.5", "kimi"], "api_key": "${env:SIM_KEY}",
         "args": {"reasoning-parser": "kimi_k2", "tensor-parallel-size": 8,
                  "trust-remote-code": True, "compilation-config": {"cudagraph_mode": "PIECEWISE"}},
         "sim": {"time_scale": 0.001}},
        env={"VLLM_LOGGING_LEVEL": "INFO"},
    )  # fmt: skip
    spec = render_launch(plan, venv_bin=str(Path(sys.executable).parent), workdir=str(tmp_path))
    env_file = tmp_path / "service.env"
    env_file.write_text(render_env_file(spec, {"SIM_KEY": "sk-sim-secret"}))
    env_file.chmod(0o600)
    log = tmp_path / "service.log"
    root = str(Path(__file__).resolve().parents[2])
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["/bin/sh", "-c", 'set -a; . "$0"; exec "$@"', str(env_file), *spec.argv],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=spec.workdir, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": root},
        )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_rendered_launch_serves_phases_models_and_smoke(launched: tuple[str, Path]) -> None:
    base, log = launched
    tracker = PhaseTracker(origin=time.monotonic())
    offset = 0

    def poll() -> bool:
        nonlocal offset
        data = log.read_bytes()
        tracker.feed_text(data[offset:].decode(), time.monotonic())
        offset = len(data)
        return tracker.ready

    wait_for(poll)
    assert [e["phase"] for e in tracker.summary()] == list(ORDER)
    assert tracker.facts["model"] == "nvidia/Kimi-K2.5-NVFP4"
    assert tracker.facts["api_url"] == f"{base}"
    with httpx.Client() as client:
        assert client.get(f"{base}/health").status_code == 200
        assert client.get(f"{base}/v1/models").status_code == 401  # the key came from the env file
        models = client.get(f"{base}/v1/models", headers={"Authorization": "Bearer sk-sim-secret"})
        assert [m["id"] for m in models.json()["data"]] == ["kimi-k2.5", "kimi"]
    with ServerClient(base, api_key="sk-sim-secret") as server:
        for data in ISSUE_SMOKE:
            result = run_smoke(SmokeCheck.model_validate(data), client=server, model="kimi-k2.5")
            assert result.passed, result.failures
    assert "sk-sim-secret" not in log.read_text()


def test_smoke_expectations_fail_clearly_against_the_simulator() -> None:
    with testing.running_simulator(reasoning_parser="kimi_k2", served_model_name=["kimi-k2.5"],
                                   profile="instant") as sim, ServerClient(sim.base_url) as client:  # fmt: skip
        wrong = SmokeCheck.model_validate(
            {"name": "code", "prompt": "Write a Python function add(a, b).",
             "expect": {"python_function": {"name": "add", "calls": [{"args": [2, 3], "returns": 6}]}}}
        )  # fmt: skip
        result = run_smoke(wrong, client=client, model="kimi-k2.5")
        assert result.failures == ["python_function: add(2, 3) returned 5, expected 6"]
        off = SmokeCheck.model_validate({"name": "off", "prompt": "Why is the sky blue?",
                                         "thinking": False, "expect": {"reasoning": "absent"}})
        result = run_smoke(off, client=client, model="kimi-k2.5")
        assert result.passed, result.failures
        assert result.response.usage and result.response.usage["completion_tokens"] > 0


@pytest.mark.parametrize("version", ["0.17.1", "0.33.0"])
def test_phases_of_the_simulator_log(version: str) -> None:
    with testing.running_simulator(vllm_version=version, tensor_parallel_size=8) as sim:
        tracker = PhaseTracker(origin=0.0)
        tracker.feed_text(sim.log(), 1.0)
    assert tracker.ready
    assert [e["phase"] for e in tracker.summary()] == list(ORDER)
    assert tracker.facts["vllm_version"] == version
    assert tracker.facts["kv_cache_tokens"] > 0


EXPECTED = {
    "flashinfer-mismatch": ("flashinfer-cubin-mismatch", "pin flashinfer-cubin==0.6.4 in install.packages"),
    "cuda-oom": ("weight-load-oom", "lower service.args.gpu-memory-utilization"),
    "kv-cache": ("no-kv-cache-memory", "raise service.args.gpu-memory-utilization"),
    "nccl": ("nccl", "NCCL_DEBUG"),
    "trust-remote-code": ("trust-remote-code", "service.args.trust-remote-code: true"),
    "port-in-use": ("address-in-use", "choose another service.port"),
}  # fmt: skip


def test_every_injected_startup_crash_is_diagnosed(tmp_path: Path) -> None:
    sims = {
        kind: testing.start_simulator(fail_at_startup=kind, tensor_parallel_size=8, log_dir=tmp_path)
        for kind in EXPECTED
    }
    try:
        for kind, sim in sims.items():
            assert sim.wait_exit(timeout=30) != 0, kind
            key, fix = EXPECTED[kind]
            found = diagnose(sim.log(), "sim")
            assert found, f"{kind}: nothing recognised in\n{sim.log()[-2000:]}"
            assert found[0].key == key, (kind, [d.key for d in found])
            assert fix in found[0].fix
            if kind == "flashinfer-mismatch":
                assert found[0].details["installed"] == "0.6.3"
            if kind == "port-in-use":
                assert found[0].details["port"] == sim.port
    finally:
        for sim in sims.values():
            sim.stop()
