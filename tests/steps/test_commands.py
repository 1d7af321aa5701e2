"""`commands:`: guarded commands, through the real CLI on this machine (the probe reads the
guards, the command runs through a real shell, its output lands in the run folder)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.orchcli import SECRET, last_run, orch

from orchestrator.errors import PlanError
from orchestrator.facts import Facts, Guard
from orchestrator.plan.loader import load_plan
from orchestrator.plan.models import CommandSpec
from orchestrator.steps.commands import CommandsStep, command_of, environment_text


def _plan(tmp_path: Path, commands: list[dict[str, Any]], **extra: Any) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"name": "cmds", "hosts": "localhost", "commands": commands,
                                    **extra}, sort_keys=False))
    return path


def test_a_met_guard_skips_and_an_unmet_one_runs() -> None:
    step = CommandsStep("commands", [
        CommandSpec(name="weights", run=["fetch"], creates="/models/done"),
        CommandSpec(name="driver", shell="nvidia-smi | grep 580", unless=["true"]),
        CommandSpec(name="always", run=["echo", "hi"]),
    ])
    assert step.request().guards == {"weights": {"creates": "/models/done"},
                                     "driver": {"unless": ["true"]}}
    facts = Facts(guards={"weights": Guard(False, "/models/done is missing"),
                          "driver": Guard(True, "`unless` exited 0")})
    summaries = [c.summary for c in step.plan(facts).changes]
    assert summaries == ["run weights: fetch (/models/done is missing)",
                         "run always: echo hi (no guard: runs on every apply)"]
    change = step.plan(facts).changes[0]
    assert change.keep_output == "weights" and not change.idempotent
    assert command_of(CommandSpec(name="x", shell="a | b", timeout=5)).raw() == \
        "timeout --kill-after=10 5 sh -c 'a | b'"
    with_env = CommandSpec(name="x", run=["hf", "download"], env={"HF_TOKEN": "${env:T}"})
    assert "${env:T}" not in command_of(with_env).raw() and "hf download" in command_of(with_env).raw()
    assert environment_text(with_env, {"T": "hf_$ecret\"x"}) == b'HF_TOKEN="hf_\\$ecret\\"x"\n'


@pytest.mark.parametrize("spec, message", [
    ({"name": "x"}, "give the command as `run:`"),
    ({"name": "x", "run": ["a"], "shell": "a"}, "one of the two"),
    ({"name": "x y", "run": ["a"]}, "short name"),
    ({"name": "x", "run": []}, "at least the program"),
    ({"name": "x", "run": ["a"], "creates": "relative/path"}, "absolute path"),
    ({"name": "x", "run": ["a"], "when": "after_lunch"}, "before_install"),
])
def test_bad_commands_are_located_errors(tmp_path: Path, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message) as caught:
        load_plan(_plan(tmp_path, [spec]))
    assert "plan.yaml:" in str(caught.value)


def test_two_commands_with_one_name_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="two commands are named 'x'"):
        load_plan(_plan(tmp_path, [{"name": "x", "run": ["a"]}, {"name": "x", "run": ["b"]}]))


@pytest.mark.slow
def test_plan_shows_what_would_run_and_apply_runs_it_once(tmp_path: Path) -> None:
    marker = tmp_path / "made"
    hostile = "a'b; touch /tmp/orch-pwned $(id) `id` \\n"
    plan = _plan(tmp_path, [
        {"name": "make", "shell": f"echo making; echo to-stderr >&2; touch {marker}",
         "creates": str(marker)},
        {"name": "echo", "shell": f"printf '%s|' {shlex.quote(hostile)} \"$TOKEN\" \"$PLAIN\"",
         "env": {"TOKEN": "${env:ORCH_E2E_SECRET}", "PLAIN": hostile},
         "unless": ["test", "-e", str(marker)]},
        {"name": "early", "run": ["true"], "when": "before_install"},
    ])
    planned = orch("plan", plan, "--detailed-exitcode", cwd=tmp_path)
    assert planned.returncode == 2, planned.stderr
    said = " ".join(planned.stdout.split())  # as printed, whatever wrapped at 120 columns
    assert f"run make: sh -c 'echo making; echo to-stderr >&2; touch {marker}' ({marker} is missing)" \
        in said
    assert "run echo: sh -c" in said and "(`unless` exited 1)" in said
    assert said.index("prepare") < said.index("commands")  # before_install runs first
    assert not marker.exists()  # plan ran only the guards

    applied = orch("apply", plan, cwd=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert marker.exists()
    logs = last_run(tmp_path) / "hosts" / "localhost" / "commands"
    assert (logs / "make.log").read_text() == "making\nto-stderr\n"
    # hostile words reach the command literally (in the script and in its environment); the
    # secret reached it (on stdin), and is masked in what it printed
    assert (logs / "echo.log").read_text() == f"{hostile}|***|{hostile}|"
    assert not Path("/tmp/orch-pwned").exists()
    assert SECRET not in applied.stdout + (logs / "echo.log").read_text()

    again = orch("plan", plan, cwd=tmp_path)
    lines = [line for line in again.stdout.splitlines() if "run " in line]
    assert lines == ["               - run early: true (no guard: runs on every apply)"]


@pytest.mark.slow
def test_a_failing_or_hanging_command_fails_the_apply_and_keeps_its_output(tmp_path: Path) -> None:
    plan = _plan(tmp_path, [{"name": "fails", "shell": "echo partial; echo broken >&2; exit 3"}])
    failed = orch("apply", plan, cwd=tmp_path)
    assert failed.returncode == 1
    assert "exit code 3" in failed.stdout and "broken" in failed.stdout
    log = last_run(tmp_path) / "hosts" / "localhost" / "commands" / "fails.log"
    assert log.read_text() == "partial\nbroken\n"
    steps = json.loads((last_run(tmp_path) / "hosts" / "localhost" / "steps.json").read_text())
    assert steps["steps"][0]["status"] == "failed"

    hang = _plan(tmp_path, [{"name": "hang", "run": ["sleep", "60"], "timeout": "1s"}])
    timed = orch("apply", hang, cwd=tmp_path, timeout=40)
    assert timed.returncode == 1 and "exit code 124" in timed.stdout  # coreutils timeout
