"""What the user sees: event lines and the recap, rendered into a fixed-width console."""

from __future__ import annotations

from rich.console import Console

from orchestrator.events import Probed, Retry, StageEvent, StepEnd
from orchestrator.output import Reporter, recap_table
from orchestrator.runs.outcome import HostOutcome, StepOutcome


def render(renderable: object, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def outcomes() -> list[HostOutcome]:
    return [
        HostOutcome("gpu1", steps=[StepOutcome("python", "changed"), StepOutcome("files", "ok"),
                                   StepOutcome("ready", "failed", error="died"),
                                   StepOutcome("smoke", "skipped")], round_trips=12, seconds=3.5),
        HostOutcome("gpu2", steps=[StepOutcome("python", "ok"), StepOutcome("files", "ok")],
                    round_trips=1, seconds=0.4),
        HostOutcome("gpu3", error="gpu3: connection refused"),
    ]


def test_recap_counts_each_host_and_fits_80_columns() -> None:
    text = render(recap_table(outcomes()))
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()
             if line.startswith("│")]
    rows = {row[0]: row[1:] for row in cells}
    # status, ok, changed, failed, skipped, trips, time
    assert rows["gpu1"] == ["failed", "1", "1", "1", "1", "12", "3.50s"]
    assert rows["gpu2"] == ["ok", "2", "0", "0", "0", "1", "0.40s"]
    assert rows["gpu3"][:4] == ["unreachable", "0", "0", "1"]
    assert max(len(line) for line in text.splitlines()) <= 80


def test_check_mode_says_pending_instead_of_changed() -> None:
    header = render(recap_table(outcomes(), title="plan")).splitlines()[2]
    assert "pending" in header and "changed" not in header


def test_a_step_line_lists_changes_findings_and_fixes() -> None:
    line = Reporter.render_event(StepEnd(
        "gpu1", step="python", status="pending", seconds=0.02,
        changes=["install flashinfer-cubin 0.6.3 -> 0.6.4 (family)"],
        findings=[{"level": "error", "message": "package family out of step",
                   "fix": "pin flashinfer-cubin==0.6.4 in install.packages"}],
    ))
    assert line is not None
    text = render(line, width=120)
    assert "gpu1" in text and "pending" in text
    assert "- install flashinfer-cubin 0.6.3 -> 0.6.4 (family)" in text
    assert "fix: pin flashinfer-cubin==0.6.4 in install.packages" in text


def test_quiet_events_print_nothing() -> None:
    assert Reporter.render_event(Probed("gpu1", seconds=0.1)) is None
    assert Reporter.render_event(StageEvent("h", stage="smoke", status="running")) is None


def test_events_serialize_as_the_run_folder_keeps_them() -> None:
    assert Retry("h1", attempt=2, error="refused").to_json() == {
        "event": "retry", "host": "h1", "attempt": 2, "error": "refused"}
