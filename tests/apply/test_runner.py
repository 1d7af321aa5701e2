"""The runner's converge loop, case by case: steps that are converged, pending, changed,
blocked, failing, not taking effect, and what follows each. The steps are small and
plain; the probe, the commands and the files are real (the local transport)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.apply.converge import HostJob
from orchestrator.apply.hosts import run_hosts
from orchestrator.events import Event, StepEnd
from orchestrator.facts import Facts, ProbeRequest
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.runs.outcome import HostOutcome
from orchestrator.steps.base import Change, Step, StepPlan
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command

INVENTORY = Inventory(hosts={"here": HostSpec(connection="local")})


@dataclass
class Marker(Step):
    """Converged when its file exists; its change creates it (or runs `command` instead)."""

    name: str
    path: Path
    command: Command | None = None
    blocked: str | None = None
    follows_earlier_changes: bool = False
    verify: bool = True

    def request(self) -> ProbeRequest:
        return ProbeRequest(host=False, files={str(self.path): None})

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name, blocked=self.blocked)
        if not facts.files[str(self.path)].exists:
            result.changes.append(Change(f"create {self.path.name}",
                                         [self.command or Command("touch", str(self.path))]))
        return result


@dataclass
class Recorder:
    events: list[Event] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def stage(self, transport: Transport, facts: Facts, outcome: HostOutcome, emit: object,
              guard: object) -> None:
        self.stages.append(outcome.host)


def run(steps: list[Step], *, check: bool = False) -> tuple[HostOutcome, Recorder]:
    recorder = Recorder()
    (outcome,) = run_hosts([HostJob("here", steps, after=[recorder.stage])], INVENTORY,
                           check=check, emit=recorder.emit)
    return outcome, recorder


def statuses(outcome: HostOutcome) -> list[tuple[str, str]]:
    return [(s.step, s.status) for s in outcome.steps]


def test_converged_steps_are_ok_in_one_round_trip_and_stages_follow(tmp_path: Path) -> None:
    (tmp_path / "a").touch()
    outcome, recorder = run([Marker("a", tmp_path / "a")])
    assert statuses(outcome) == [("a", "ok")]
    assert outcome.round_trips == 1 and not outcome.failed
    assert recorder.stages == ["here"]


def test_check_mode_shows_pending_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "s").touch()  # the service is as planned ... but a pending change precedes it
    outcome, recorder = run([Marker("a", tmp_path / "a"),
                             Marker("svc", tmp_path / "s", follows_earlier_changes=True)], check=True)
    assert statuses(outcome) == [("a", "pending"), ("svc", "pending")]
    assert outcome.steps[1].changes == [
        "svc: likely to change after the pending changes above (packages or config files)"]
    assert not (tmp_path / "a").exists()
    assert recorder.stages == []  # no stages after converge in check mode


def test_changes_are_applied_then_verified(tmp_path: Path) -> None:
    outcome, _ = run([Marker("a", tmp_path / "a"), Marker("b", tmp_path / "b")])
    assert statuses(outcome) == [("a", "changed"), ("b", "changed")]
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()
    # probe, change a, re-probe, change b, re-probe
    assert outcome.round_trips == 5


def test_a_blocked_step_fails_and_says_why_and_the_rest_is_skipped(tmp_path: Path) -> None:
    outcome, recorder = run([Marker("a", tmp_path / "a", blocked="no pin says which version"),
                             Marker("b", tmp_path / "b")])
    assert statuses(outcome) == [("a", "failed"), ("b", "skipped")]
    assert outcome.steps[0].error == "no pin says which version"
    assert outcome.steps[0].changes == []  # nothing of a blocked step happens
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # the stages after converge still run (collect keeps the logs that say why), told of
    # the failure through the outcome they get
    assert recorder.stages == ["here"]
    ends = [e for e in recorder.events if isinstance(e, StepEnd)]
    assert [(e.step, e.status) for e in ends] == [("a", "failed"), ("b", "skipped")]


def test_a_failing_change_fails_its_step_and_keeps_what_came_before(tmp_path: Path) -> None:
    outcome, _ = run([Marker("a", tmp_path / "a"),
                      Marker("b", tmp_path / "b", command=Command.script("echo nope >&2; exit 4")),
                      Marker("c", tmp_path / "c")])
    assert statuses(outcome) == [("a", "changed"), ("b", "failed"), ("c", "skipped")]
    assert "exit code 4" in (outcome.steps[1].error or "") and "nope" in (outcome.steps[1].error or "")


@pytest.mark.parametrize("verify", [True, False])
def test_a_change_that_does_not_take_effect(tmp_path: Path, verify: bool) -> None:
    outcome, recorder = run([Marker("a", tmp_path / "a", command=Command("true"), verify=verify)])
    assert statuses(outcome) == [("a", "changed")]
    if verify:  # StepDidNotConverge: the re-probe still shows the change
        assert outcome.error is not None and "still not converged after apply: a: create a" in outcome.error
        assert recorder.stages == []
    else:  # (a step whose result is checked elsewhere, like the service's readiness)
        assert outcome.error is None and recorder.stages == ["here"]
