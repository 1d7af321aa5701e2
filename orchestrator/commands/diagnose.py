"""`orch diagnose LOGFILE [--engine NAME]`: explain a model server's crash from its log, by
that engine's crash signatures (vLLM's unless `--engine` names another).

Exit codes: 0 when at least one known signature was found, 1 when none was (the last lines
are shown instead) or the file cannot be read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.service.diagnosis import Diagnosis

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).

# Only the end of a large log matters: the crash is there, and a service log keeps growing.
MAX_BYTES = 4 * 1024 * 1024


def configure(parser: argparse.ArgumentParser) -> None:
    from orchestrator.plan.models.base import LAUNCHABLE

    parser.add_argument("logfile", type=Path, help="a model server's log file, '-' for stdin")
    parser.add_argument("--engine", choices=sorted(LAUNCHABLE), default="vllm",
                        help="the engine that wrote the log, as the plan's service.engine "
                             "names it (default: vllm)")
    parser.add_argument(
        "--lines", type=int, default=30, metavar="N",
        help="log lines to show when nothing is recognised (default 30)",
    )
    parser.add_argument("--json", action="store_true", help="print the diagnoses as JSON")


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from orchestrator.console import make_console
    from orchestrator.service.diagnosis import diagnose, tail

    text = _read(args.logfile)
    found = diagnose(text, args.engine)
    if args.json:
        payload = {
            "recognised": bool(found),
            "diagnoses": [d.to_json() for d in found],
            "tail": [] if found else tail(text, args.lines),
        }
        print(json.dumps(payload, indent=2))
        return 0 if found else 1
    console = make_console(file=sys.stdout)
    render(console, str(args.logfile), found, tail(text, args.lines))
    return 0 if found else 1


def render(console: Console, source: str, diagnoses: list[Diagnosis], last_lines: list[str]) -> None:
    """Print the diagnoses (or the tail when there are none) to a rich console."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.text import Text

    from orchestrator.console import UNBOUNDED

    if not diagnoses:
        console.print(f"[bold]No known crash signature in {escape(source)}.[/bold]")
        console.print(f"Last {len(last_lines)} lines:")
        for line in last_lines:
            console.print(Text("  " + line, style="dim"))
        return
    for diagnosis in diagnoses:
        body = Text()
        body.append("cause     ", style="bold")
        body.append(diagnosis.cause + "\n")
        body.append("fix       ", style="bold green")
        body.append(diagnosis.fix + "\n")
        body.append("evidence  ", style="bold")
        body.append(diagnosis.evidence_line, style="dim")
        for line in diagnosis.related:
            body.append("\nearlier   ", style="bold")
            body.append(line, style="dim")
        style = "red" if diagnosis.level == "error" else "yellow"
        title = f"{diagnosis.level}: {diagnosis.key}"
        # A terminal's panels span its width; anywhere else (UNBOUNDED) as wide as the text
        console.print(Panel(body, title=title, title_align="left", border_style=style,
                            expand=console.width < UNBOUNDED))


def _read(path: Path) -> str:
    import sys

    from orchestrator.errors import OrchError

    if str(path) == "-":
        return sys.stdin.read()[-MAX_BYTES:]
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - MAX_BYTES))
            data = handle.read()
    except OSError as error:
        raise OrchError(
            f"cannot read the log file {path}: {error.strerror or error}",
            hint="give the path of a vLLM log (e.g. the run folder's service.log)",
        ) from None
    if b"\0" in data:
        raise OrchError(
            f"{path} is not a text file (it holds NUL bytes)",
            hint="give the path of a vLLM log (e.g. the run folder's service.log)",
        )
    return data.decode("utf-8", errors="replace")
