"""Fixtures of the report tests: one runs root made once per session with real run folders
(three simulated pivots, one non-simulated run, one failed run), and two variant runs under
roots of their own (a varied sweep, a crashed engine); see runmaker.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orchestrator import masking
from orchestrator.compile import resolved_plan_yaml
from orchestrator.runs.writer import RunFolder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

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


@pytest.fixture(autouse=True)
def _no_secrets_left() -> None:
    masking.clear()


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    top = tmp_path_factory.mktemp("report")
    root = top / "runs"
    variants = [(varied_plan(), top / "varied-runs"), (crashing_plan(), top / "crashed-runs")]
    sim, (varied, crashed) = make_sim_runs(root, variants=variants)
    real_plan = sim_plan(
        REPO / "plans/kimi-nvfp4.yaml", time_scale=1.0, concurrency=(1, 2, 4), sets=["bench.max_tokens=128"],
        metrics_interval=None,
    )
    with running_stream_server("--tokens", "40", "--itl-ms", "1") as url:
        real = record_run(root, Server(real_plan, url), simulated=False)
    loaded = sim_plan(REPO / "plans/sim/kimi-nvfp4.yaml", time_scale=0.005, concurrency=(1,))
    failed = RunFolder.create(loaded.plan.name, "f" * 64, root=root, hosts=["localhost"])
    failed.write_plan(resolved_plan_yaml(loaded))  # written first, as apply does
    failed.finish("failed")
    return Runs(root, sim, real, failed.path, varied, crashed)
