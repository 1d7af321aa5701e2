"""The simulator serves the predicted curve: MiniMax's simulated plan applied on this machine
as TP2 x DP2 (not its TP4), benchmarked by orch, measures what `predict_plan` says for that
plan within 15% (model time: the level files' normalized figures), and not what TP4 would do.

Only what keeps it short is overridden: two levels of one batch each, the test's own venv,
port and name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port

from orchestrator.plan.loader import load_plan
from orchestrator.plan.prediction import predict_plan
from orchestrator.runs.run_records import LevelResult

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans/sim/minimax-m2.5.yaml"
SHAPE = ["service.args.tensor-parallel-size=2", "service.args.data-parallel-size=2"]


def test_the_simulator_serves_the_predicted_curve_of_a_changed_plan(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {"localhost": {"connection": "local"}}}))
    sets = [*SHAPE, "bench.concurrency=[1,64]", "bench.requests_per_level=1x", "bench.warmup=0",
            "bench.gpu_telemetry=null", "service.sim.time_scale=0.5",
            "service.sim.startup_time_scale=0.001", f"python.venv={tmp_path}/venv",
            f"python.interpreter={quick_venv.interpreter()}", f"service.port={free_port()}",
            f"service.name=whatif-{tmp_path.name[-8:]}"]
    args = [arg for value in sets for arg in ("--set", value)]
    try:
        applied = orch("apply", PLAN, "-i", inventory, *args, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout + applied.stderr
    finally:
        orch("stop", PLAN, "-i", inventory, *args, cwd=tmp_path)
    run = last_run(tmp_path)
    predicted = predict_plan(load_plan(PLAN, [], sets).plan)
    tp4 = predict_plan(load_plan(PLAN, [], []).plan, [64])
    assert predicted.fits
    for level in predicted.levels:
        path = run / "hosts/localhost/bench" / f"level-c{level.max_concurrency}.json"
        measured = LevelResult.model_validate_json(path.read_text())
        assert measured.normalized is not None
        got = measured.normalized["output_throughput"]
        print(f"C={level.max_concurrency}: predicted {level.output_throughput:.0f} tok/s, "
              f"served {got:.0f} tok/s (model time)")
        assert got == pytest.approx(level.output_throughput, rel=0.15), (level, measured.normalized)
    at_64 = next(lv for lv in predicted.levels if lv.max_concurrency == 64).output_throughput
    assert at_64 > 1.15 * tp4.levels[0].output_throughput  # another curve than TP4's
