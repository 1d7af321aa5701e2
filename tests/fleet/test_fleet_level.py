"""How a sweep learns it benchmarks a router, against the real one: `GET /list_workers` names
its workers (a server answers no such list), the router's process is found from its port when
it listens on this machine's loopback, and without its metrics URL the level says so while
each replica's own /metrics is still read."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from fixtures.gpu import install
from fixtures.orchcli import orch
from fixtures.router import running_router

from orchestrator.bench.fleet_level import FleetSampler, cpu_seconds, local_pid, router_workers
from orchestrator.bench.gpu_telemetry import GpuSampler
from orchestrator.bench.sweep import run_sweep
from orchestrator.plan.models import Bench
from orchestrator.sim.testing import running_simulator
from orchestrator.transport.local import LocalTransport

pytestmark = pytest.mark.slow
FAST_START = {"startup_time_scale": 0.001}


def test_a_router_is_told_from_a_server_and_read_without_its_metrics(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        sims = [stack.enter_context(running_simulator("m", profile="instant", **FAST_START)) for _ in range(2)]
        router = stack.enter_context(running_router([s.base_url for s in sims], tmp_path / "router.log"))
        assert router_workers(sims[0].base_url) is None  # a server: 404
        assert sorted(router_workers(router.url) or []) == sorted(s.base_url for s in sims)
        assert local_pid(router.url) == router.process.pid
        assert local_pid(sims[1].base_url) == sims[1].process.pid
        assert local_pid("http://10.0.0.1:8000") is None  # not this machine's loopback
        assert (cpu_seconds(router.process.pid) or -1) >= 0
        not_one = orch("bench", "--url", sims[0].base_url, "--router-metrics", router.metrics_url,
                       "--requests", "2", "--result-dir", tmp_path / "nothing", cwd=tmp_path)
        assert not_one.returncode != 0 and "is not a vllm-router" in not_one.stdout + not_one.stderr
        assert not (tmp_path / "nothing").exists()  # refused before anything was written
        config = Bench.model_validate({"concurrency": [2], "requests_per_level": 8, "max_tokens": 8})
        result = run_sweep(config, base_url=router.url, model=None, api_key=None, out_dir=tmp_path / "out")
        wrong = run_sweep(config, base_url=router.url, model=None, api_key=None, out_dir=tmp_path / "wrong",
                          router_metrics=router.url)  # its API port: /metrics there is a worker's
    said = wrong.levels[0].result.extra("router")["problem"]
    assert "no vllm_router_ counters (is it the router's --prometheus-port?)" in said
    block = result.levels[0].result.extra("router")
    assert "--router-metrics" in block["problem"] and "requests" not in block
    assert sorted(row["url"] for row in block["replicas"]) == sorted(s.base_url for s in sims)
    assert sum(row["server"]["delta_requests_finished"] for row in block["replicas"]) == 8


def test_a_replicas_host_gpus_are_kept_beside_its_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller with a GPU sampler for one replica's host (here the stand-in nvidia-smi on
    this machine) hands it to the fleet sampler: that replica's `gpu` is its block, the other's
    says it has none."""
    monkeypatch.setenv("PATH", f"{install(tmp_path / 'gpu-bin')}:{os.environ['PATH']}")
    with contextlib.ExitStack() as stack:
        # a level of a second or so: longer than the stand-in nvidia-smi takes to start on a busy machine
        sims = [stack.enter_context(running_simulator("m", profile="tiny-qwen2-vllm-cpu-2-cores", time_scale=1.0,
                                                      **FAST_START)) for _ in range(2)]
        router = stack.enter_context(running_router([s.base_url for s in sims], tmp_path / "router.log"))
        fleet = FleetSampler(router.url, router.metrics_url, [s.base_url for s in sims], 0.05,
                             gpus={sims[0].base_url: GpuSampler(LocalTransport(), 0.05)})
        config = Bench.model_validate({"concurrency": [2], "requests_per_level": 16, "max_tokens": 64,
                                       "ignore_eos": True})
        result = run_sweep(config, base_url=router.url, model=None, api_key=None, out_dir=tmp_path / "out",
                           samplers=[fleet])
    rows = {row["url"]: row for row in result.levels[0].result.extra("router")["replicas"]}
    sampled, other = rows[sims[0].base_url]["gpu"], rows[sims[1].base_url]["gpu"]
    assert sampled["source"] == "nvidia-smi" and sampled["gpu_count"] == 8 and sampled["samples"] > 0
    assert other == {"source": "none", "reason": "a simulator replica has no GPU"}
    assert [rows[s.base_url]["processed"] for s in sims] == [8.0, 8.0]
