"""The loop's choices, driven through its own interface with a real Optuna study (SQLite in
the tune folder) and the real plan loader: what the trials' applies would measure is written
into each entry as `run_trial` writes it, so these tests take no host. The baseline comes
first, then the limiter's advice inside the space, then the sampler's proposals, never one
tried before; three trials without a 3% gain stop the loop; the budget counts what ran."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.plan.models import Plan
from orchestrator.tune.loop import Tuner
from orchestrator.tune.setup import TuneOptions, prepare
from orchestrator.tune.study import Study
from orchestrator.tune.trials import Runner
from orchestrator.tune.tune_file import TrialEntry, TuneRecord, read
from orchestrator.whatif import WhatIfUnknown

PLAN: dict[str, Any] = {
    "name": "tl", "hosts": "localhost",
    "python": {"venv": "/tmp/orch-tl/venv", "interpreter": "python3", "installer": "pip"},
    "service": {"engine": "sim", "model": "m", "backend": "process", "port": 8123,
                "args": {"max-num-seqs": 16}},
    "tune": {"service.args.max-num-seqs": {"low": 8, "high": 256, "log": True},
             "service.sim.profile": ["instant", "kimi-k2.5-int4-8x-rtx-pro-6000"],
             "slo": "p99_ttft<=2s"},
}


def tuner(tmp_path: Path, **options: Any) -> Tuner:
    plan = tmp_path / "tl.yaml"
    plan.write_text(yaml.safe_dump(PLAN))
    opts = TuneOptions(plan=plan, **options)
    setup = prepare(opts)
    folder = tmp_path / "tune"
    folder.mkdir()
    record = TuneRecord(plan="tl", plan_file=str(plan), slo=setup.slo_text,
                        objective=setup.objective)
    return Tuner(setup, opts, record, Study(folder, seed=0), Runner(plan, folder), lambda _: None)


def measured(entry: TrialEntry, objective: float | None, advice: list[dict[str, Any]] | None = None) -> None:
    """What run_trial writes for a trial whose sweep met the SLO at `objective` (None: a
    start-up failure)."""
    if objective is None:
        entry.status, entry.cause = "failed", "localhost: the GPUs ran out of memory"
        return
    entry.status, entry.objective, entry.best, entry.peak = "complete", objective, objective, objective
    entry.slo_met, entry.constraint, entry.advice = True, -0.5, advice or []


def test_baseline_then_advice_inside_the_space_then_new_proposals(tmp_path: Path) -> None:
    loop = tuner(tmp_path, trials=6)
    base = loop.next("localhost")
    assert base is not None and base.source == "baseline" and base.sets == ["tune=null", "matrix=null"]
    assert base.values == {"service.args.max-num-seqs": 16, "service.sim.profile": None}
    measured(base, 100.0, [{"service.args.max-num-seqs": [32, 64, 512]},
                           {"service.args.kv-cache-dtype": ["fp8"]}])
    loop.finish(base)
    first = loop.next("localhost")
    assert first is not None and first.source == "advice"
    assert first.changed == {"service.args.max-num-seqs": 32}
    assert "service.args.max-num-seqs=32" in first.sets
    measured(first, 150.0)
    loop.finish(first)
    second = loop.next("localhost")
    assert second is not None and second.source == "advice"
    assert second.changed == {"service.args.max-num-seqs": 64}  # 512 lies outside the space
    measured(second, 160.0)
    loop.finish(second)
    seen = {repr(sorted(t.values.items())) for t in loop.record.trials}
    for _ in range(3):
        entry = loop.next("localhost")
        assert entry is not None and entry.source == "search" and entry.optuna_trial is not None
        assert 8 <= entry.values["service.args.max-num-seqs"] <= 256
        assert repr(sorted(entry.values.items())) not in seen  # never a candidate tried before
        seen.add(repr(sorted(entry.values.items())))
        measured(entry, 200.0 + 50 * len(seen))
        loop.finish(entry)
    assert loop.next("localhost") is None
    assert loop.stopped == "the trial budget: 6 of 6 trials ran"
    assert [t.number for t in read(tmp_path / "tune").trials] == [1, 2, 3, 4, 5, 6]
    told = loop.study.study.get_trials()
    assert len([t for t in told if t.state.name == "COMPLETE"]) == 3  # the search's own
    assert all(t.constraints == {"slo": -0.5} for t in told)


def test_three_trials_without_a_3_percent_gain_stop_it(tmp_path: Path) -> None:
    loop = tuner(tmp_path)
    scores = [100.0, 150.0, 152.0, None, 154.0]  # the last three gain under 3% over 150
    for score in scores:
        entry = loop.next("localhost")
        assert entry is not None, loop.stopped
        measured(entry, score)
        loop.finish(entry)
    assert loop.next("localhost") is None
    assert loop.stopped == "3 trials in a row gained under 3% over the best before them"
    statuses = [t.status for t in loop.record.trials]
    assert statuses == ["complete", "complete", "complete", "failed", "complete"]


def test_a_spent_time_budget_starts_no_trial(tmp_path: Path) -> None:
    loop = tuner(tmp_path, seconds=0.0)
    assert loop.next("localhost") is None  # not even the baseline: no time was given
    assert loop.stopped is not None and loop.stopped.startswith("the time budget")


@dataclass(frozen=True)
class Guess:
    fits: bool
    why: str
    peak_output_throughput: float


def guess(plan: Plan) -> Guess:
    """Any profile but `instant` is predicted to lose by far."""
    assert plan.service is not None and plan.service.sim is not None
    return Guess(True, "", 1000.0 if plan.service.sim.profile == "instant" else 10.0)


def test_a_candidate_predicted_to_lose_by_far_is_skipped(tmp_path: Path) -> None:
    loop = tuner(tmp_path, trials=4, predict=guess)
    base = loop.next("localhost")
    assert base is not None and base.predicted == {"fits": True, "why": "",
                                                   "peak_output_throughput": 10.0}
    measured(base, 100.0)  # the baseline runs whatever is predicted
    loop.finish(base)
    for _ in range(3):
        entry = loop.next("localhost")
        assert entry is not None and entry.values["service.sim.profile"] == "instant"
        measured(entry, 120.0 + entry.number)
        loop.finish(entry)
    skipped = [t for t in loop.record.trials if t.status == "skipped"]
    assert skipped and all(t.values["service.sim.profile"] != "instant" for t in skipped)
    assert all(re.fullmatch(r"skipped: predicted peak 10 tok/s < 0\.5x the best measured "
                            r"(100|12\d)", t.cause or "") for t in skipped), skipped
    assert all(t.run is None for t in skipped)


@dataclass(frozen=True)
class Peak:
    fits: bool
    why: str
    peak_output_throughput: float


def by_seqs(plan: Plan) -> Peak:
    """A prediction: the larger the batch limit, the higher the peak."""
    assert plan.service is not None
    return Peak(True, "", 100.0 + int(plan.service.args["max-num-seqs"]))  # type: ignore[call-overload]


def test_with_a_prediction_the_search_runs_the_highest_predicted_of_its_proposals(
        tmp_path: Path) -> None:
    loop = tuner(tmp_path, trials=4, predict=by_seqs)
    base = loop.next("localhost")
    assert base is not None
    measured(base, 100.0)
    loop.finish(base)
    first = loop.next("localhost")
    assert first is not None and first.source == "search"
    drawn = [t for t in loop.record.trials if t.source == "search" and t.status != "skipped"]
    assert len(drawn) == 4 and [t.status for t in drawn].count("pending") == 3
    seqs = [t.values["service.args.max-num-seqs"] for t in drawn]
    assert first.values["service.args.max-num-seqs"] == max(seqs), seqs
    measured(first, 150.0)
    loop.finish(first)
    second = loop.next("localhost")  # the next highest of those waiting, before a new draw
    waiting = sorted(seqs, reverse=True)[1]
    assert second is not None and second.values["service.args.max-num-seqs"] == waiting
    measured(second, 160.0)
    loop.finish(second)
    loop.close()  # stopped: what was drawn and not run is skipped, and the study told so
    left = [t for t in drawn if t.status == "skipped"]
    assert len(left) == 2 and all(t.cause == "skipped: not run before the tune stopped"
                                  for t in left)
    assert not loop.asked


def unknown(plan: Plan) -> Peak:
    """The what-if model does not know the plan's model (a CPU build, say)."""
    raise WhatIfUnknown("the what-if model models GPUs only")


def test_without_a_prediction_each_proposal_runs_as_it_is_drawn(tmp_path: Path) -> None:
    loop = tuner(tmp_path, trials=3, predict=unknown)
    base = loop.next("localhost")
    assert base is not None and base.predicted == {"error": "the what-if model models GPUs only"}
    measured(base, 100.0)
    loop.finish(base)
    first = loop.next("localhost")
    assert first is not None and first.source == "search"
    assert [t.status for t in loop.record.trials] == ["complete", "running"]  # none waits
    measured(first, 90.0)
    loop.finish(first)
    loop.close()
    assert not [t for t in loop.record.trials if t.status == "skipped"]
