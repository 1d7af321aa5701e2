"""`orch compare` and `orch report` of a fleet beside one box, both benchmarked for real: one
simulator alone, and three of the same behind the real vLLM router (`orch bench --url
<router> --router-metrics ...`). The comparison knows the fleet's replicas from its level
files, puts its scaling per replica (fleet peak / (replicas x one-box peak)) beside its peak,
divides per GPU by a replica's GPUs times its replicas, and shows the fleet level by level."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.orchcli import orch
from fixtures.router import running_router

from orchestrator.report.comparison import compare_runs
from orchestrator.report.gpus import GpuCount
from orchestrator.sim.testing import running_simulator

pytestmark = pytest.mark.slow
SIM = {"profile": "tiny-qwen2-vllm-cpu-2-cores", "time_scale": 1.0, "startup_time_scale": 0.001}
SWEEP = ["--concurrency", "1,3", "--requests", "12", "--max-tokens", "16"]


def test_a_fleet_beside_one_box(tmp_path: Path) -> None:
    box, fleet = tmp_path / "one-box", tmp_path / "fleet"
    with contextlib.ExitStack() as stack:
        sims = [stack.enter_context(running_simulator("m", **SIM)) for _ in range(3)]
        alone = orch("bench", "--url", sims[0].base_url, *SWEEP, "--result-dir", box, cwd=tmp_path)
        assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
        router = stack.enter_context(running_router([s.base_url for s in sims], tmp_path / "router.log"))
        routed = orch("bench", "--url", router.url, "--router-metrics", router.metrics_url, *SWEEP,
                      "--result-dir", fleet, cwd=tmp_path)
        assert routed.returncode == 0, routed.stdout[-3000:] + routed.stderr[-3000:]
    shown = orch("compare", box, fleet, cwd=tmp_path)
    print(shown.stdout)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    assert "A fleet beside one box" in shown.stdout and "The fleet, level by level" in shown.stdout
    data = json.loads(orch("compare", box, fleet, "--json", cwd=tmp_path).stdout)
    one, three = data["series"]
    assert (one["replicas"], three["replicas"]) == (None, 3)
    factor = data["scaling_per_replica"][three["label"]]
    assert factor == pytest.approx(three["peak_throughput"] / (3 * one["peak_throughput"]))
    assert f"{factor:.2f}" in shown.stdout
    comparison = compare_runs([box, fleet])
    two_gpus = replace(comparison.series[1], gpus=GpuCount(2, "a replica's plan: TP 2"))
    assert two_gpus.per_gpu(600.0) == 100.0  # 2 GPUs x 3 replicas
    page = orch("report", box, fleet, "-o", tmp_path / "report.html", cwd=tmp_path)
    assert page.returncode == 0, page.stdout[-3000:] + page.stderr[-3000:]
    html = (tmp_path / "report.html").read_text()
    assert "The fleet, level by level" in html and "4/4/4" in html
