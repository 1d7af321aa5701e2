"""Command line entry point: parse arguments, call the library, map errors to exit codes.

Start-up time matters (a no-op re-apply should take well under a second), so each command
lives in its own module that is imported only when that command runs. A command module
exposes `configure(parser)` (argparse only, no heavy imports at module level) and
`run(args) -> int`.

Exit codes: 0 success (or converged), 1 error, 2 changes pending (`orch plan`),
130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Protocol

from orchestrator import __version__


class CommandModule(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# name -> (module, one-line help). Order is the order of `orch --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("orchestrator.commands.validate", "check plan files"),
    "schema": ("orchestrator.commands.schema", "print the plan's JSON Schema"),
    "plan": ("orchestrator.commands.converge", "show what apply would change (check mode)"),
    "apply": ("orchestrator.commands.converge", "converge hosts to a plan and write a run folder"),
    "status": ("orchestrator.commands.service", "show the service state on each host"),
    "logs": ("orchestrator.commands.service", "print the service log"),
    "stop": ("orchestrator.commands.service", "stop the service"),
    "restart": ("orchestrator.commands.service", "restart the service"),
    "diagnose": ("orchestrator.commands.diagnose", "explain a vLLM crash from its log"),
    "bench": ("orchestrator.bench.cli", "benchmark an OpenAI-compatible server"),
    "sim": ("orchestrator.sim.cli", "the vLLM-compatible simulator (orch sim serve)"),
    "runs": ("orchestrator.commands.runs", "list run folders"),
    "compare": ("orchestrator.commands.compare", "compare runs or plans side by side"),
    "diff": ("orchestrator.commands.diff", "show what changed between two plans"),
    "report": ("orchestrator.commands.report", "write a self-contained HTML report"),
}


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orch",
        description="Deploy and benchmark vLLM on GPU hosts from a declarative plan.",
    )
    parser.add_argument("--version", action="version", version=f"orch {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks for errors (also ORCH_DEBUG=1)"
    )
    return parser


def _load(name: str) -> CommandModule:
    module_name = COMMANDS[name][0]
    module: CommandModule = importlib.import_module(module_name)  # type: ignore[assignment]
    return module


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The parser, with only `command`'s sub-parser configured (the others are named only)."""
    parser = _top_parser()
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub = subs.add_parser(name, help=help_text, description=help_text)
        if name == command:
            _load(name).configure(sub)
    return parser


def _first_command(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if arg in COMMANDS:
            return arg
        if not arg.startswith("-"):
            return None
    return None


def _quiet_libraries(debug: bool) -> None:
    """What a library logs is orch's to say: paramiko's tracebacks of a failed connection
    become one translated error, retries are events (--debug shows everything)."""
    import logging

    if debug:
        logging.basicConfig(level=logging.DEBUG)
        return
    for name in ("paramiko", "orchestrator"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _first_command(argv)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 1
    debug = args.debug or os.environ.get("ORCH_DEBUG") == "1"
    _quiet_libraries(debug)
    from orchestrator.errors import Interrupted, OrchError

    def terminated(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminated)  # as Ctrl-C: the same clean ending
    try:
        return _load(args.command).run(args)
    except OrchError as error:
        if debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as stopped:
        if debug:
            raise
        signum = stopped.signum if isinstance(stopped, Interrupted) else signal.SIGINT
        print(f"interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
