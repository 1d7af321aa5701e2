"""`orch tune plans/sim/kimi-nvfp4-tune.yaml` end to end, on short time scales and levels: the
tune over the motivating run's space (layouts, expert parallelism, max-num-seqs, KV dtype, the
INT4 build) finds a deployment at least 1.5x the baseline's peak under the SLO, skips the
layouts that do not fit by the what-if model's prediction, writes the tuned plan, and `orch
apply` of that plan reproduces the winner's peak."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fixtures import quick_venv
from fixtures.orchcli import orch
from fixtures.ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SLO = "p99_ttft<=5s,p99_tpot<=120ms"  # the plan's tune.slo


def peak(run: Path) -> float:
    """The highest output tok/s (model time) of the run's levels."""
    levels = (run / "hosts/localhost/bench").glob("level-c*.json")
    return max(float(json.loads(p.read_text())["normalized"]["output_throughput"])
               for p in levels)


def test_the_kimi_tune_finds_1_5x_and_its_plan_reproduces_the_winner(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "plans", tmp_path / "plans",
                    ignore=shutil.ignore_patterns("*.tuned.yaml"))
    plan = tmp_path / "plans/sim/kimi-nvfp4-tune.yaml"
    sets = [f"python.venv={tmp_path / 'venv'}", f"python.interpreter={quick_venv.interpreter()}",
            f"service.port={free_port()}", f"service.name=tk-{tmp_path.name[-10:]}",
            "service.sim.startup_time_scale=0.001", "smoke=[]",
            "bench.concurrency=[64, 128, 256]", "bench.max_tokens=64", "bench.ignore_eos=true",
            "bench.warmup=0"]
    args: list[str | Path] = [a for s in sets for a in ("--set", s)]
    try:
        tuned = orch("tune", plan, "--trials", "8", *args, cwd=tmp_path, timeout=240)
        out = " ".join((tuned.stdout + tuned.stderr).split())
        assert tuned.returncode == 0, out
        folder = next((tmp_path / "runs/sim-kimi-nvfp4-tune").glob("tune-*"))
        record: dict[str, Any] = json.loads((folder / "tune.json").read_text())
        trials = record["trials"]
        assert record["slo"] == SLO and record["status"] == "complete"
        assert sum(t["run"] is not None for t in trials) <= 8  # the budget (or no gain) stopped it
        base, best = trials[0], next(t for t in trials if t["number"] == record["winner"])
        assert base["source"] == "baseline" and base["slo_met"], base
        assert best["objective"] >= 1.5 * base["objective"], (best, base)
        assert f"winner: trial {best['number']}, " in out and " before, now " in out
        # layouts that do not fit the 8 GPUs are skipped by the prediction, said why, no apply
        skipped = [t for t in trials if t["status"] == "skipped"]
        assert skipped and all(t["run"] is None for t in skipped)
        unfit = [t for t in skipped if not t["predicted"]["fits"]]
        assert unfit and {t["cause"].split(" ", 2)[1] for t in unfit} <= {"weights", "TP8", "TP4",
                                                                         "TP2"}
        # the rest were predicted to lose by far, or drawn and not run before the tune stopped
        assert all(t["cause"].startswith(("skipped: predicted peak", "skipped: not run"))
                   for t in skipped if t["predicted"]["fits"])

        tuned_plan = tmp_path / "plans/sim/kimi-nvfp4-tune.tuned.yaml"
        assert (tmp_path / record["tuned_plan"]).resolve() == tuned_plan.resolve()
        applied = orch("apply", tuned_plan, cwd=tmp_path, timeout=120)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        again = sorted((tmp_path / "runs/sim-kimi-nvfp4-tune").glob("*/meta.json"))
        assert len(again) == 1
        winner_run = tmp_path / best["run"]
        assert (again[0].parent / "plan.yaml").read_text() == (winner_run / "plan.yaml").read_text()
        # the same deployment measured again: near the winner's figure (a simulator starved
        # on a loaded machine measured 16% under it, at these short levels: 64-token answers
        # at time scale 0.1), and still well above the baseline's, which it beat by 1.5x
        again_peak = peak(again[0].parent)
        assert again_peak == pytest.approx(best["peak"], rel=0.25)
        assert again_peak >= 1.2 * base["peak"], (again_peak, base["peak"])
    finally:
        orch("stop", plan, *args, cwd=tmp_path)
