"""Text orch did not write reaches the terminal escaped (orchestrator/console.py: `shown`, and
the consoles that apply it to everything they render): a hand-edited run folder, an error
that quotes a file, a service's log (`orch logs`, `--follow`), checked on a real
pseudo-terminal and through a pipe."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from fixtures.orchcli import orch
from fixtures.terminal import PseudoTerminal
from rich.text import Text

from orchestrator.console import make_console, shown

TITLE, CLEAR, RED = "\x1b]0;PWNED-TITLE\x07", "\x1b[2J", "\x1b[31m"


def _hostile_run(root: Path) -> Path:
    run = root / "runs" / "p" / "20260101T000000Z-00000000"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({
        "orch_version": f"0{TITLE}", "plan": f"p{CLEAR}", "plan_digest": "0" * 64,
        "command": "apply", "hosts": ["h"], "started": "2026-01-01T00:00:00+00:00",
        "status": f"ok{RED}[bold]x\u202eevil"}))
    return run


def test_a_hand_edited_meta_json_cannot_drive_the_terminal(tmp_path: Path) -> None:
    _hostile_run(tmp_path)
    terminal = PseudoTerminal(["runs"], cwd=tmp_path)
    terminal.expect("20260101T000000Z-00000000")
    assert terminal.finish() == 0
    for control in (TITLE, CLEAR, f"{RED}[bold]", "\u202e"):
        assert control not in terminal.raw, repr(terminal.raw)
    assert "p\\x1b[2J" in terminal.output and "ok\\x1b[31m[bold]x\\u202eevil" in terminal.output


def test_an_error_quoting_hostile_text_is_escaped_through_a_pipe_too(tmp_path: Path) -> None:
    _hostile_run(tmp_path)
    result = orch("compare", "p", cwd=tmp_path)
    assert result.returncode == 1
    assert RED not in result.stderr and "ok\\x1b[31m[bold]x" in result.stderr, result.stderr


def test_a_plan_line_with_controls_is_quoted_escaped(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(f"name: ok\nservice: {{model: m, port: '1{CLEAR}'}}\n")
    result = orch("validate", tmp_path / "p.yaml", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert CLEAR not in result.stdout + result.stderr


def test_shown_makes_controls_visible_and_keeps_text() -> None:
    assert shown("a\tb\nc") == "a\tb\nc"
    assert shown(f"x{TITLE}") == "x\\x1b]0;PWNED-TITLE\\x07"
    assert shown("\x9b31m \u202e \x7f") == "\\x9b31m \\u202e \\x7f"
    assert shown("[red]x[/red]", markup=True) == "\\[red]x\\[/red]"


def test_every_console_escapes_what_it_renders_but_keeps_its_own_styles(tmp_path: Path) -> None:
    with open(tmp_path / "out", "w") as file:
        console = make_console(file=file)
        console.print(Text(f"host said {CLEAR}", style="bold"))
    written = (tmp_path / "out").read_text()
    assert CLEAR not in written and "host said \\x1b[2J" in written


OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # writes the terminal's clipboard


def _logged_service(tmp_path: Path, text: str) -> tuple[Path, Path]:
    """A plan whose service log (where `orch logs` reads it) holds `text`: the log a server
    wrote, without the server (the reading is what is tested)."""
    name = f"logs-{tmp_path.name[-12:].strip('_')}"
    plan = tmp_path / "p.yaml"
    plan.write_text(f"name: logs\nhosts: localhost\npython:\n  venv: {tmp_path}/venv\n"
                    f"service:\n  engine: sim\n  model: m\n  name: {name}\n  backend: process\n")
    log = tmp_path / "venv" / ".orch" / "service" / name / "service.log"
    log.parent.mkdir(parents=True)
    log.write_text(text)
    return plan, log


@pytest.mark.slow
def test_orch_logs_shows_a_hostile_log_escaped_on_a_terminal_and_in_a_pipe(tmp_path: Path) -> None:
    plan, _ = _logged_service(tmp_path, f"INFO start {TITLE}\nclip {OSC52}\nwipe {CLEAR} done\n")
    terminal = PseudoTerminal(["logs", str(plan)], cwd=tmp_path)
    terminal.expect("done")
    assert terminal.finish() == 0
    for control in (TITLE, OSC52, CLEAR, "\x1b]"):
        assert control not in terminal.raw, repr(terminal.raw)
    assert "start \\x1b]0;PWNED-TITLE\\x07" in terminal.output
    assert "clip \\x1b]52;c;ZWNobyBwd25lZA==\\x07" in terminal.output
    piped = orch("logs", plan, cwd=tmp_path)
    assert piped.returncode == 0 and "wipe \\x1b[2J done" in piped.stdout, piped.stdout
    assert "\x1b" not in piped.stdout


@pytest.mark.slow
def test_orch_logs_follow_escapes_what_the_log_grows_by(tmp_path: Path) -> None:
    plan, log = _logged_service(tmp_path, "first start\n")
    terminal = PseudoTerminal(["logs", str(plan), "--follow"], cwd=tmp_path)
    try:
        terminal.expect("first start")
        with log.open("a") as out:
            out.write(f"grown {TITLE}{CLEAR}{OSC52}\n")
        terminal.expect("grown \\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1b]52;c;")
    finally:
        terminal.process.send_signal(signal.SIGINT)  # how a user ends --follow
    assert terminal.finish() == 0
    for control in (TITLE, OSC52, CLEAR):
        assert control not in terminal.raw, repr(terminal.raw)


@pytest.mark.slow
def test_orch_logs_follow_goes_on_with_a_log_replaced_or_cut(tmp_path: Path) -> None:
    """A restart moves the log to service.log.1 and starts a shorter one: --follow says so
    and shows the new log from its start; so for a log cut in place."""
    plan, log = _logged_service(tmp_path, "first start, a long line of the old log\n")
    terminal = PseudoTerminal(["logs", str(plan), "--follow"], cwd=tmp_path)
    try:
        terminal.expect("first start")
        log.rename(log.with_name("service.log.1"))
        log.write_text("second start\n")
        terminal.expect("was replaced or cut (a restart?): following the new log from its start")
        terminal.expect("second start")
        log.write_text("cut\n")  # truncated in place: shorter than what was read
        terminal.expect("was replaced or cut")
        terminal.expect("cut")
    finally:
        terminal.process.send_signal(signal.SIGINT)
    assert terminal.finish() == 0
