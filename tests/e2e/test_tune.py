"""`orch tune` over real processes: the simulator as the server (process backend) on this
machine, each trial a real apply and sweep. A tune of max-num-seqs and a model pivot (the
simulator's profile) finds the better deployment, writes the tuned plan beside the plan, and
`orch apply` of it reproduces the winner; a trial that fails at start-up is a result with
its diagnosed cause; Ctrl-C stops the tune and `--resume` continues it without running the
finished trials again; a candidate a prediction says does not fit is skipped, said why (the
prediction a stand-in with the what-if model's signature: a plan in, a forecast out)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import orch
from fixtures.ports import free_port

from orchestrator.plan.models import Plan
from orchestrator.service.lock import service_lock_path
from orchestrator.tune.run import tune
from orchestrator.tune.setup import TuneOptions

pytestmark = pytest.mark.slow

NVFP4 = "kimi-k2.5-nvfp4-8x-rtx-pro-6000"
INT4 = "kimi-k2.5-int4-8x-rtx-pro-6000"


def write_plan(tmp_path: Path, tune: dict[str, Any], **sim: Any) -> Path:
    plan = {
        "name": "tn", "hosts": "localhost",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(),
                   "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "name": f"tn-{tmp_path.name[-10:]}",
                    "args": {"max-num-seqs": 2},
                    "sim": {"profile": NVFP4, "time_scale": 0.02, "startup_time_scale": 0.001,
                            **sim}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 8], "requests_per_level": 16, "warmup": 0,
                  "max_tokens": 64, "ignore_eos": True},
        "tune": tune,
    }
    path = tmp_path / "plans" / "tn.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def tune_json(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    found = sorted((tmp_path / "runs" / "tn").glob("tune-*/tune.json"))
    assert len(found) == 1, found
    return found[0].parent, json.loads(found[0].read_text())


def c8(run: Path) -> float:
    level = json.loads((run / "hosts/localhost/bench/level-c8.json").read_text())
    return float(level["normalized"]["output_throughput"])


def test_tune_finds_the_better_deployment_and_its_plan_reproduces_it(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {"service.args.max-num-seqs": [2, 8],
                                 "service.sim.profile": [NVFP4, INT4]})
    try:
        tuned = orch("tune", plan, "--slo", "p99_ttft<=30s,p99_tpot<=500ms", "--trials", "4",
                     cwd=tmp_path)
        out = " ".join((tuned.stdout + tuned.stderr).split())
        assert tuned.returncode == 0, out
        folder, record = tune_json(tmp_path)
        assert record["status"] == "complete", record["stopped"]
        every = record["trials"]
        assert every[0]["source"] == "baseline" and len(every) == 4
        # the what-if model ranks the candidates: INT4 at max-num-seqs 2 is predicted to lose
        # by far against the best measured (INT4 at 8), so it costs no apply
        skipped = [t for t in every if t["status"] == "skipped"]
        assert [t["values"] for t in skipped] == [{"service.args.max-num-seqs": 2,
                                                   "service.sim.profile": INT4}], every
        assert skipped[0]["cause"].startswith("skipped: predicted peak"), skipped
        trials = [t for t in every if t["status"] != "skipped"]
        assert all(t["status"] == "complete" and t["slo_met"] for t in trials), trials
        assert all(t["predicted"]["fits"] for t in every)
        runs = [Path(tmp_path / t["run"]) for t in trials]
        assert all(run.is_relative_to(folder) and (run / "meta.json").is_file() for run in runs)
        assert len({json.dumps(t["values"], sort_keys=True) for t in every}) == 4  # no repeat
        assert set(trials[0]["slo"]) == {"p99_ttft", "p99_tpot"}
        assert all(t["host"] == "localhost" and t["limiter"] for t in trials)
        assert [t["step"] for t in trials] == ["first", "restart", "restart"]
        assert "(restart)" in out  # each trial says what reaching it takes
        best = max(trials, key=lambda t: t["objective"])
        assert record["winner"] == best["number"]
        assert best["values"]["service.args.max-num-seqs"] == 8, trials  # twice the batch
        assert (folder / "study.db").is_file()
        assert "Tune tn: output_throughput meeting p99_ttft<=30s,p99_tpot<=500ms" in out
        assert f"winner: trial {best['number']}, " in out and "x (" in out
        assert " before, now " in out

        tuned_plan = tmp_path / "plans" / "tn.tuned.yaml"
        assert (tmp_path / record["tuned_plan"]).resolve() == tuned_plan.resolve()
        text = tuned_plan.read_text()
        assert folder.name in text.splitlines()[0]
        assert f"orch apply --locked {best['run']}" in text  # its exact package set
        written = yaml.safe_load(text)
        assert written["extends"] == "tn.yaml" and written["tune"] is None
        sets = {"service.args.max-num-seqs": written.get("service", {}).get("args", {})
                .get("max-num-seqs", 2),
                "service.sim.profile": written.get("service", {}).get("sim", {})
                .get("profile", NVFP4)}
        assert sets == best["values"]
        applied = orch("apply", tuned_plan, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        again = sorted(p.parent for p in (tmp_path / "runs" / "tn").glob("*/meta.json"))
        assert len(again) == 1
        winner_run = Path(tmp_path / best["run"])
        assert (again[0] / "plan.yaml").read_text() == (winner_run / "plan.yaml").read_text()
        baseline = trials[0]["objective"]
        assert c8(again[0]) > 1.5 * baseline, (c8(again[0]), baseline)
    finally:
        orch("stop", plan, cwd=tmp_path)


def test_a_trial_failing_at_start_up_is_a_result(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {"service.sim.fail_at_startup": ["cuda-oom"],
                                 "service.args.max-num-seqs": [2]})
    try:
        tuned = orch("tune", plan, "--slo", "p99_ttft<=30s", "--trials", "3", cwd=tmp_path)
        out = " ".join((tuned.stdout + tuned.stderr).split())
        assert tuned.returncode == 0, out  # the baseline met the SLO: it wins
        _, record = tune_json(tmp_path)
        trials = record["trials"]
        assert [t["status"] for t in trials] == ["complete", "failed"], trials
        failed = trials[1]
        assert failed["changed"] == {"service.sim.fail_at_startup": "cuda-oom"}
        assert failed["cause"].startswith("localhost: ") and "memory" in failed["cause"].lower()
        assert record["stopped"] == "every candidate of the tune space was tried"
        assert record["winner"] == 1 and record["tuned_plan"] is None
        assert "winner: trial 1, the plan as written" in out
        assert "failed: localhost: " in out
        assert not (tmp_path / "plans" / "tn.tuned.yaml").exists()
    finally:
        orch("stop", plan, cwd=tmp_path)


def test_ctrl_c_stops_and_resume_continues(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {"service.args.max-num-seqs": [2, 4, 8]}, time_scale=0.1)
    command = [sys.executable, "-m", "orchestrator.cli", "tune", str(plan), "--slo",
               "p99_ttft<=60s", "--trials", "3"]
    try:
        with subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "COLUMNS": "120"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as first:
            deadline = time.monotonic() + 180
            while True:
                assert time.monotonic() < deadline and first.poll() is None, "no second trial"
                found = sorted((tmp_path / "runs" / "tn").glob("tune-*/trial-2/tn/*/hosts/"
                                                                "localhost/bench/level-c1.json"))
                if found:
                    break
                time.sleep(0.05)
            first.send_signal(signal.SIGINT)
            said, _ = first.communicate(timeout=120)
        assert first.returncode != 0, said
        folder, record = tune_json(tmp_path)
        assert record["status"] == "interrupted", said
        statuses = [t["status"] for t in record["trials"]]
        assert statuses[:2] == ["complete", "interrupted"], said
        assert set(statuses[2:]) <= {"pending"}  # the limiter's advice waits its turn
        assert f"--resume {folder.relative_to(tmp_path)}" in " ".join(said.split())
        assert "Warning" not in said
        kept = record["trials"][0]["run"]

        resumed = orch("tune", plan, "--slo", "p99_ttft<=60s", "--trials", "3", "--resume",
                       folder, cwd=tmp_path)
        out = " ".join((resumed.stdout + resumed.stderr).split())
        assert resumed.returncode == 0, out
        _, record = tune_json(tmp_path)
        trials = record["trials"]
        assert [t["status"] for t in trials] == ["complete"] * 3, trials
        assert trials[0]["run"] == kept  # not run again
        assert len(list((folder / "trial-1").glob("tn/*/meta.json"))) == 1
        assert len(list((folder / "trial-2").glob("tn/*/meta.json"))) == 1  # resumed in place
        assert record["resumed"] and "(1 trials kept)" in out
        other = orch("tune", plan, "--slo", "p99_ttft<=50s", "--resume", folder, cwd=tmp_path)
        assert other.returncode == 64 and "that tune ran with slo" in other.stderr, other.stderr
    finally:
        orch("stop", plan, cwd=tmp_path)


@dataclass(frozen=True)
class Forecast:
    fits: bool
    why: str
    peak_output_throughput: float


def predict(plan: Plan) -> Forecast:
    assert plan.service is not None and plan.service.sim is not None
    if plan.service.sim.profile == INT4:
        return Forecast(False, "weights 143 GB per GPU > 96 GB x 0.90", 0.0)
    return Forecast(True, "", 100.0 * int(plan.service.args["max-num-seqs"]))  # type: ignore[arg-type]


def test_a_candidate_predicted_not_to_fit_is_skipped(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, {"service.args.max-num-seqs": [2, 8],
                                 "service.sim.profile": [NVFP4, INT4]})
    try:
        code = tune(TuneOptions(plan=plan, slo="p99_ttft<=30s", trials=4,
                                runs_dir=tmp_path / "runs", predict=predict))
    finally:  # the last trial's server keeps running after a tune, as after an apply
        orch("stop", plan, cwd=tmp_path)
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    folder = next((tmp_path / "runs" / "tn").glob("tune-*"))
    trials = json.loads((folder / "tune.json").read_text())["trials"]
    skipped = [t for t in trials if t["status"] == "skipped"]
    ran = [t for t in trials if t["status"] == "complete"]
    assert {t["values"]["service.sim.profile"] for t in skipped} == {INT4}, trials
    assert len(skipped) == 2 and all(t["run"] is None for t in skipped)
    assert all(t["cause"] == "skipped: weights 143 GB per GPU > 96 GB x 0.90" for t in skipped)
    assert [t["values"]["service.args.max-num-seqs"] for t in ran] == [2, 8]
    assert ran[1]["predicted"] == {"fits": True, "why": "", "peak_output_throughput": 800.0}
    assert not list(folder.glob(f"trial-{skipped[0]['number']}"))  # no apply
    assert "skipped: weights 143 GB per GPU > 96 GB x 0.90" in out
    assert " 800 " in out.split("Tune tn:")[-1]  # the predicted peak in the table


def test_a_pivot_to_another_install_is_a_trial_like_any(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {"vars.v": ["1", "2"]})
    data = yaml.safe_load(plan.read_text())
    data["vars"] = {"v": "1"}
    data["python"]["venv"] = str(tmp_path / "venv-${vars.v}")
    plan.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        tuned = orch("tune", plan, "--slo", "p99_ttft<=30s", "--trials", "2", cwd=tmp_path)
        out = " ".join((tuned.stdout + tuned.stderr).split())
        assert tuned.returncode == 0, out
        _, record = tune_json(tmp_path)
        trials = record["trials"]
        assert [(t["step"], t["status"]) for t in trials] == [("first", "complete"),
                                                               ("install", "complete")], trials
        assert trials[1]["changed"] == {"vars.v": "2"}
        assert (tmp_path / "venv-1" / "bin" / "orch").is_file()
        assert (tmp_path / "venv-2" / "bin" / "orch").is_file()  # the pivot installed
        assert "(install + restart)" in out
    finally:
        orch("stop", plan, "--set", "vars.v=2", cwd=tmp_path)
        orch("stop", plan, cwd=tmp_path)


def test_a_host_held_by_another_apply_stops_the_tune_and_resume_runs_the_trial(
        tmp_path: Path) -> None:
    """Another apply holding the service's lock says nothing of a candidate: the trial is
    interrupted (not a failed result) and the tune stops with exit 75 rather than burn its
    budget on trials the host never took; --resume, once the host is free, runs it."""
    plan = write_plan(tmp_path, {"service.args.max-num-seqs": [2, 4]})
    name = yaml.safe_load(plan.read_text())["service"]["name"]
    lock = Path(service_lock_path(name, "localhost")).expanduser()
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held as a running `orch apply` holds it
        os.write(fd, json.dumps({"user": "someone", "command": "apply", "run": "theirs"}).encode())
        held = orch("tune", plan, "--slo", "p99_ttft<=30s", "--trials", "3", cwd=tmp_path)
    finally:
        os.ftruncate(fd, 0)
        os.close(fd)
    try:
        out = " ".join(held.stdout.split())
        assert held.returncode == 75, out + held.stderr
        folder, record = tune_json(tmp_path)
        assert [t["status"] for t in record["trials"]] == ["interrupted"], record["trials"]
        cause = record["trials"][0]["cause"]
        assert cause.startswith("localhost: another apply holds ") and "someone" in cause, cause
        assert record["status"] == "interrupted" and record["stopped"].startswith("a host was busy")
        where = folder.relative_to(tmp_path)  # as the tune named it: under ./runs
        assert f"continue it when the host is free: orch tune {plan} --resume {where}" in out
        resumed = orch("tune", plan, "--slo", "p99_ttft<=30s", "--trials", "1",
                       "--resume", where, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
        record = json.loads((folder / "tune.json").read_text())
        ran = [(t["source"], t["status"]) for t in record["trials"] if t["status"] != "pending"]
        assert ran == [("baseline", "complete")], record["trials"]  # advice waits for budget
        assert record["winner"] == 1
    finally:
        orch("stop", plan, cwd=tmp_path)
