"""The parts of `orch tune` that need no host: the `tune:` section's shape (located errors),
the --slo grammar, the space as Optuna sees it, the limiter's advice inside the space, the
stop rule, the skip by prediction, the winner's reason and the tuned plan."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from orchestrator.errors import PlanError
from orchestrator.plan.loader import load_plan
from orchestrator.plan.models.slo import SloError, describe, parse_objective_metric, parse_slo
from orchestrator.plan.models.tune import Range
from orchestrator.tune.candidates import advised
from orchestrator.tune.forecast import skip_reason
from orchestrator.tune.loop import changed
from orchestrator.tune.setup import TuneOptions, prepare
from orchestrator.tune.space import Space, tune_sets
from orchestrator.tune.stop import Budget, stalled, stop_reason
from orchestrator.tune.table import table, winner
from orchestrator.tune.tune_file import TrialEntry, TuneRecord
from orchestrator.tune.tuned_plan import tuned_text

BASE: dict[str, Any] = {
    "name": "tn",
    "hosts": "localhost",
    "python": {"venv": "/tmp/orch-tn/venv", "interpreter": "python3", "installer": "pip"},
    "service": {"engine": "sim", "model": "m", "backend": "process", "port": 8123,
                "args": {"max-num-seqs": 16}},
}


def write(tmp_path: Path, tune: dict[str, Any]) -> Path:
    """The plan, its tune: section one axis a line (flow style)."""
    path = tmp_path / "plan.yaml"
    lines = [f"  {key}: {json.dumps(value)}" for key, value in tune.items()]
    path.write_text(yaml.safe_dump(BASE, sort_keys=False) + "tune:\n" + "\n".join(lines) + "\n")
    return path


def test_axes_lists_and_ranges_nested_or_dotted(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, {
        "service.args.max-num-seqs": {"low": 8, "high": 512, "log": True},
        "service": {"args": {"max-num-batched-tokens": {"low": 4096, "high": 16384, "step": 4096}}},
        "service.args.gpu-memory-utilization": {"low": 0.8, "high": 0.95},
        "service.sim.profile": ["instant", "kimi-k2.5-int4-8x-rtx-pro-6000"],
        "slo": "p99_ttft<=2s", "objective": "request_throughput"})).plan
    assert plan.tune is not None and plan.tune.slo == "p99_ttft<=2s"
    space = Space(plan.tune.params())
    assert list(space.params) == ["service.args.max-num-seqs", "service.args.max-num-batched-tokens",
                                  "service.args.gpu-memory-utilization", "service.sim.profile"]
    dists = space.distributions()
    assert isinstance(dists["service.args.max-num-seqs"], optuna.distributions.IntDistribution)
    assert dists["service.args.max-num-seqs"].log
    assert isinstance(dists["service.args.gpu-memory-utilization"],
                      optuna.distributions.FloatDistribution)
    assert space.holds("service.args.max-num-batched-tokens", 8192)
    assert not space.holds("service.args.max-num-batched-tokens", 8000)  # off the step
    assert not space.holds("service.args.max-num-seqs", 1024)
    assert space.size() is None  # a range of reals
    study = optuna.create_study(direction="maximize")
    values = space.suggest(study.ask())
    assert all(space.holds(k, v) for k, v in values.items())
    assert tune_sets({"service.args.max-num-seqs": 64}) == [
        "service.args.max-num-seqs=64", "tune=null", "matrix=null"]


@pytest.mark.parametrize(("tune", "line", "field", "said"), [
    ({"service.args.max-num-seqs": {"low": 64, "high": 8}}, 1, "tune.service.args.max-num-seqs",
     "low (64) must be below high (8)"),
    ({"service.args.max-num-seqs": {"low": 8, "high": 64, "log": True, "step": 8}}, 1,
     "tune.service.args.max-num-seqs", "stepped or logarithmic, not both"),
    ({"service.args.max-num-seqs": {"low": 8, "hi": 64}}, 1, "tune.service.args.max-num-seqs.hi",
     "a range takes low, high, step and log; not hi"),
    ({"service.args.max-num-seqs": []}, 1, "tune.service.args.max-num-seqs",
     "a non-empty list of values or a range"),
    ({"name": ["a", "b"]}, 1, "tune.name", "name cannot be tuned"),
    ({"slo": "p99_ttft<=2s"}, None, "tune", "needs at least one axis"),
    ({"service.args.max-num-seqs": [8, 16], "slo": "p99_ttft<=2"}, 2, "tune.slo",
     "no unit; give s or ms"),
    ({"service.args.max-num-seqs": [8, 16], "objective": "p99_ttft"}, 2, "tune.objective",
     "unknown objective 'p99_ttft'"),
])
def test_a_bad_tune_section_is_a_located_error(tmp_path: Path, tune: dict[str, Any],
                                                line: int | None, field: str, said: str) -> None:
    path = write(tmp_path, tune)
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert caught.value.file == str(path) and caught.value.field == field, caught.value
    assert said in caught.value.message, caught.value.message
    if line is not None:  # the line of the value at fault
        lines = path.read_text().splitlines()
        assert caught.value.line == lines.index("tune:") + 1 + line, caught.value


@pytest.mark.parametrize(("text", "said"), [
    ("p99_ttft<=2", "no unit; give s or ms"),
    ("p99_ttft<=2h", "unknown unit 'h'"),
    ("p99_ttfx<=2s", "unknown metric 'ttfx'"),
    ("p99_ttft>=2s", "an upper limit on a latency: use <= or <"),
    ("ttft<=2s", "cannot read 'ttft<=2s'"),
    ("p99_ttft<=2s,", "terms separated by commas"),
    ("p99_ttft<=2s,p99_ttft<=3s", "p99_ttft is limited twice"),
    ("p101_ttft<=2s", "percentile 101 is not between 0 and 100"),
])
def test_the_slo_grammar_errors(text: str, said: str) -> None:
    with pytest.raises(SloError, match=None) as caught:
        parse_slo(text)
    assert said in str(caught.value), caught.value


def test_the_slo_grammar_reads_units_and_metrics() -> None:
    slo = parse_slo("p99_ttft<=2s, p99_tpot<=60ms,p50_itl<30ms,mean_e2el<=1.5s")
    assert [(c.key, c.op, c.limit_ms) for c in slo] == [
        ("p99_ttft_ms", "<=", 2000.0), ("p99_tpot_ms", "<=", 60.0), ("p50_itl_ms", "<", 30.0),
        ("mean_e2el_ms", "<=", 1500.0)]
    assert describe(slo) == "p99_ttft<=2s,p99_tpot<=60ms,p50_itl<30ms,mean_e2el<=1.5s"
    assert parse_objective_metric("Output_Throughput") == "output_throughput"
    with pytest.raises(SloError, match="a throughput to maximise"):
        parse_objective_metric("ttft")


def test_advice_becomes_candidates_only_inside_the_space() -> None:
    space = Space({"service.args.max-num-seqs": Range(8, 128, None, True)})
    baseline = {"service.args.max-num-seqs": 32}
    found = advised([{"service.args.max-num-seqs": [64, 128, 256]},
                     {"service.args.kv-cache-dtype": ["fp8"]}], space, baseline)
    assert found == [{"service.args.max-num-seqs": 64}, {"service.args.max-num-seqs": 128}]


def test_the_stop_rule_three_trials_under_three_percent() -> None:
    assert not stalled([100.0, 102.0, 101.0])  # the baseline and two
    assert stalled([100.0, 102.0, 101.0, 102.9])  # none of the three gained 3%
    assert not stalled([100.0, 102.0, 101.0, 105.2])  # the last gained 3.1% over 102
    assert stalled([100.0, 150.0, None, 151.0, 149.0])  # a failed trial gains nothing
    assert not stalled([None, None, None, None])  # nothing met the SLO yet: go on
    budget = Budget(trials=5, seconds=60)
    assert stop_reason(budget, 5, 1.0, []) == "the trial budget: 5 of 5 trials ran"
    assert stop_reason(budget, 2, 61.0, []) == "the time budget: 61s of 60s spent"
    assert stop_reason(budget, 4, 1.0, [100.0, 100.0, 100.0, 100.0]) is not None
    assert stop_reason(budget, 4, 1.0, [100.0, 200.0, 300.0, 400.0]) is None


@dataclass(frozen=True)
class Guess:
    fits: bool
    why: str
    peak_output_throughput: float


def test_skip_by_prediction() -> None:
    assert skip_reason(None, 100.0) is None
    assert skip_reason(Guess(False, "weights 143 GB per GPU > 96 GB x 0.90", 0), None) == \
        "skipped: weights 143 GB per GPU > 96 GB x 0.90"
    assert skip_reason(Guess(True, "", 40.0), 100.0) == \
        "skipped: predicted peak 40 tok/s < 0.5x the best measured 100"
    assert skip_reason(Guess(True, "", 60.0), 100.0) is None
    assert skip_reason(Guess(True, "", 60.0), None) is None


def _trial(number: int, source: str, objective: float | None, limiter: str,
           changed: dict[str, Any], met: bool = True) -> TrialEntry:
    return TrialEntry(number=number, source=source, values=changed, changed=changed,
                      status="complete", objective=objective, slo_met=met, limiter=limiter)


def test_the_winner_says_what_changed_the_gain_and_the_limiters() -> None:
    record = TuneRecord(plan="kimi", plan_file="plans/kimi.yaml", slo="p99_ttft<=2s",
                        objective="output_throughput", trials=[
        _trial(1, "baseline", 1000.0, "interconnect-bound from C=64", {}),
        _trial(2, "advice", 1800.0, "compute-bound from C=128", {"vars.model": "kimi-int4"}),
        _trial(3, "search", 2500.0, "compute-bound from C=256", {"vars.model": "x"}, met=False)])
    found = winner(record)
    assert found is not None and found.entry.number == 2
    assert found.reason == ("model=kimi-int4: 1.8x (1,800 against 1,000 output_throughput); "
                            "interconnect-bound from C=64 before, now compute-bound from C=128")


def test_the_tuned_plan_extends_the_plan_and_sets_only_what_changed(tmp_path: Path) -> None:
    plan = tmp_path / "plans" / "kimi.yaml"
    plan.parent.mkdir()
    plan.write_text(yaml.safe_dump({**BASE, "tune": {"service.args.max-num-seqs": [16, 64]}}))
    text = tuned_text(plan, ["bench.max_tokens=32"], {"service.args.max-num-seqs": 64},
                      "Tuned by orch tune: runs/tn/tune-x")
    assert text.startswith("# Tuned by orch tune: runs/tn/tune-x\n")
    assert yaml.safe_load(text) == {"extends": "kimi.yaml", "bench": {"max_tokens": 32},
                                    "service": {"args": {"max-num-seqs": 64}},
                                    "tune": None, "matrix": None}
    tuned = tmp_path / "plans" / "kimi.tuned.yaml"
    tuned.write_text(text)
    loaded = load_plan(tuned).plan
    assert loaded.tune is None and loaded.service is not None
    assert loaded.service.args["max-num-seqs"] == 64 and loaded.name == "tn"


def test_the_tuned_plan_keeps_the_tunes_overlays_after_the_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plans" / "kimi.yaml"
    plan.parent.mkdir()
    plan.write_text(yaml.safe_dump({**BASE, "tune": {"service.args.max-num-seqs": [16, 64]}}))
    overlay = tmp_path / "site" / "big.yaml"
    overlay.parent.mkdir()
    overlay.write_text(yaml.safe_dump({"service": {"port": 9000, "args": {"max-num-seqs": 8}}}))
    tuned = tmp_path / "plans" / "kimi.tuned.yaml"
    tuned.write_text(tuned_text(plan, [], {"service.args.max-num-seqs": 64}, "x", [overlay]))
    assert yaml.safe_load(tuned.read_text())["extends"] == ["kimi.yaml", "../site/big.yaml"]
    loaded = load_plan(tuned).plan
    assert loaded.service is not None and loaded.service.port == 9000
    assert loaded.service.args["max-num-seqs"] == 64  # the winner's value over the overlay's


def test_a_choice_written_as_a_variable_reference_is_the_baselines_value(tmp_path: Path) -> None:
    # the build pivot of plans/sim/kimi-nvfp4-tune.yaml: the plan's vars.build resolves to a
    # map; the axis lists the references, so the plan as written is its nvfp4 choice
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({
        **BASE, "vars": {"build": "${vars.builds.a}", "builds": {"a": {"p": "x"}, "b": {"p": "y"}}},
        "tune": {"vars.build": ["$${vars.builds.a}", "$${vars.builds.b}"],
                 "service.args.max-num-seqs": [16, 32]}}))
    setup = prepare(TuneOptions(plan=path, slo="p99_ttft<=2s"))
    assert setup.baseline == {"vars.build": "${vars.builds.a}", "service.args.max-num-seqs": 16}
    assert changed({"vars.build": "${vars.builds.b}", "service.args.max-num-seqs": 16},
                   setup.baseline) == {"vars.build": "${vars.builds.b}"}


def test_the_table_shows_no_predicted_peak_for_a_deployment_that_does_not_fit() -> None:
    record = TuneRecord(plan="p", plan_file="p.yaml", slo="p99_ttft<=2s",
                        objective="output_throughput", trials=[
        TrialEntry(number=1, source="baseline", values={}, status="complete", objective=100.0,
                   peak=100.0, predicted={"fits": True, "why": "", "peak_output_throughput": 98.0}),
        TrialEntry(number=2, source="search", values={"tp": 4}, changed={"tp": 4},
                   status="skipped", cause="skipped: weights 142 GiB per GPU > 95.6 GiB x 0.90",
                   predicted={"fits": False, "why": "weights", "peak_output_throughput": 0.0})])
    shown = table(record, None)
    column = [c.header for c in shown.columns].index("Predicted")
    assert [row[column] for row in shown.rows] == ["98", "-"]
