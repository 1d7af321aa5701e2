"""The roll's and the repair's events as a person and events.jsonl see them."""

from __future__ import annotations

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
