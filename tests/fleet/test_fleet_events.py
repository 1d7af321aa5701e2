"""The roll's and the repair's events as a person and events.jsonl see them."""

from __future__ import annotations

import io
import re

from rich.console import Console

from orchestrator.events import HostStart, StageEvent
from orchestrator.fleet.events import FleetRepair, roll_step
from orchestrator.output import Reporter


def test_a_roll_step_is_one_stage_line_naming_the_replica() -> None:
    event = roll_step("b", "draining", "3 in flight")
    line = Reporter.render_event(event)
    assert line is not None
    assert line.plain.split() == ["b", "roll", "running", "draining", "(3", "in", "flight)"]
    assert event.to_json() == {"event": "roll", "host": "b", "stage": "roll",
                               "status": "running", "message": "draining (3 in flight)",
                               "replica": "b", "step": "draining"}


def test_a_repair_is_kept_as_a_fleet_event() -> None:
    event = FleetRepair("c", stage="fleet", status="changed", message="registered again",
                        replica="c")
    assert event.to_json()["event"] == "fleet" and event.kept
    line = Reporter.render_event(event)
    assert line is not None and line.plain.split()[:3] == ["c", "fleet", "changed"]


def test_a_replica_without_a_live_line_gets_its_steps_printed() -> None:
    """On a terminal a host's progress goes on its live line; a replica's roll steps have no
    such line (its id is no host the board knows), so they are printed as they come."""
    out = io.StringIO()
    reporter = Reporter(Console(file=out, force_terminal=True, width=100))
    with reporter.live(auto_refresh=False):
        reporter(HostStart("a"))
        reporter(StageEvent("a", stage="smoke", status="running", message="MSG-A"))
        reporter(roll_step("b", "draining", "3 in flight"))
    printed = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in out.getvalue().splitlines()]
    assert any("roll" in line and "running" in line and "draining (3 in flight)" in line
               for line in printed)
    assert not any("running" in line and "MSG-A" in line for line in printed)
