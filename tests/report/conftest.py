"""Fixtures of the report tests: one runs root made once per session with real run folders
(three simulated pivots, one non-simulated run, one failed run), and two variant runs under
roots of their own (a varied sweep, a crashed engine); see runmaker.py.

The varied run's host has GPUs: the stand-in nvidia-smi (tests/fixtures/fake_nvidia_smi.py)
is first on the PATH while it runs, and its sweep samples them as apply's does (GpuSampler
over the local transport), so its levels hold `gpu_telemetry`, energy and tokens per joule."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from orchestrator.apply.compile import resolved_plan_yaml
from orchestrator.bench.gpu_telemetry import GpuSampler
from orchestrator.runs.writer import RunFolder
from orchestrator.transport.local import LocalTransport

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

from fixtures.gpu import install  # noqa: E402
from runmaker import (  # noqa: E402
    REPO,
    Runs,
    Server,
    crashing_plan,
    make_sim_runs,
    record_run,
    sim_plan,
    varied_plan,
)
from stream_server import running_stream_server  # noqa: E402

GPU_INTERVAL_S = 0.05  # the varied run's GPU sampling (its levels last about 0.1-0.4 s)


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    top = tmp_path_factory.mktemp("report")
    root = top / "runs"
    variants = [(varied_plan(), top / "varied-runs"), (crashing_plan(), top / "crashed-runs")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{install(top / 'gpu-bin')}:{os.environ['PATH']}")
        patch.setenv("FAKE_NVIDIA_SMI_RAMP_S", "0.15")  # GPU 5 reaches its limit and throttles
        gpus = GpuSampler(LocalTransport(), GPU_INTERVAL_S)
        sim, (varied, crashed) = make_sim_runs(root, variants=variants, variant_samplers=[[gpus]])
        real_plan = sim_plan(
            REPO / "plans/kimi-nvfp4.yaml", time_scale=1.0, concurrency=(1, 2, 4),
            sets=["bench.max_tokens=128"], metrics_interval=None,
        )
        # A real server on a GPU host: its facts list the (stand-in) nvidia-smi's GPUs.
        with running_stream_server("--tokens", "40", "--itl-ms", "1") as url:
            real = record_run(root, Server(real_plan, url), simulated=False)
    loaded = sim_plan(REPO / "plans/sim/kimi-nvfp4.yaml", time_scale=0.005, concurrency=(1,))
    failed = RunFolder.create(loaded.plan.name, "f" * 64, root=root, hosts=["localhost"])
    failed.write_plan(resolved_plan_yaml(loaded))  # written first, as apply does
    failed.finish("failed")
    return Runs(root, sim, real, failed.path, varied, crashed)
