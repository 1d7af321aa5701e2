"""Text orch did not write reaches the terminal escaped (orchestrator/console.py: `shown`, and
the consoles that apply it to everything they render): a hand-edited run folder, an error
that quotes a file, checked on a real pseudo-terminal and through a pipe."""

from __future__ import annotations

import json
from pathlib import Path

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
