"""Command line entry point: parse arguments, call the library, map errors to exit codes.

Start-up time matters (a no-op re-apply should take well under a second), so each command
lives in its own module that is imported only when that command runs. A command module
exposes `configure(parser)` (argparse only, no heavy imports at module level) and
`run(args) -> int`.

Exit codes: `orchestrator/exit_codes.py` (the one table; `orch --help` prints it).
"""

from __future__ import annotations

import _thread
import argparse
import atexit
import importlib
import io
import os
import signal
import sys
import threading
import typing
from collections.abc import Sequence
from typing import Protocol

from orchestrator import __version__
from orchestrator.exit_codes import ExitCode, table

# Anything more is imported where it is used (start-up time: see above).


class CommandModule(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# name -> (module, one-line help). Order is the order of `orch --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("orchestrator.commands.validate", "check plan files"),
    "schema": ("orchestrator.commands.schema", "print the plan's JSON Schema"),
    "plan": ("orchestrator.commands.plan_apply", "show what apply would change (check mode)"),
    "predict": ("orchestrator.commands.predict", "predict a plan's curve from the what-if model"),
    "apply": ("orchestrator.commands.plan_apply", "converge hosts to a plan and write a run folder"),
    "status": ("orchestrator.commands.service", "show the service state on each host"),
    "logs": ("orchestrator.commands.service", "print the service log"),
    "stop": ("orchestrator.commands.service", "stop the service"),
    "restart": ("orchestrator.commands.service", "restart the service"),
    "diagnose": ("orchestrator.commands.diagnose", "explain a vLLM crash from its log"),
    "bench": ("orchestrator.commands.bench", "benchmark an OpenAI-compatible server"),
    "sim": ("orchestrator.sim.cli", "the vLLM-compatible simulator (orch sim serve)"),
    "tune": ("orchestrator.commands.tune", "find the best deployment of a plan's tune: space"),
    "runs": ("orchestrator.commands.runs", "list run folders"),
    "compare": ("orchestrator.commands.compare", "compare runs or plans side by side"),
    "diff": ("orchestrator.commands.diff", "show what changed between two plans"),
    "report": ("orchestrator.commands.report", "write a self-contained HTML report"),
    "init": ("orchestrator.commands.init", "write a starting plan and inventory for a host"),
    "completion": ("orchestrator.commands.completion", "print a shell completion script"),
}


class Parser(argparse.ArgumentParser):
    """Usage errors exit 64 (not 2, which `orch plan --detailed-exitcode` uses for "changes
    pending") and show the usage of the command that was given, not the top level's."""

    def error(self, message: str) -> typing.NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n"
                                  f"(see `{self.prog} --help`)\n")


class _Version(argparse.Action):
    """`orch --version`: the version and the build (the digest apply installs on hosts)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and build, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from orchestrator.selfwheel import self_wheel_digest

        print(f"orch {__version__} (build {self_wheel_digest()[:12]})")
        parser.exit(0)


def _top_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="orch",
        description="Deploy and benchmark vLLM on GPU hosts from a declarative plan.",
        epilog="exit codes:\n" + table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks for errors (also ORCH_DEBUG=1)"
    )
    return parser


def _load(name: str) -> CommandModule:
    module_name = COMMANDS[name][0]
    module: CommandModule = importlib.import_module(module_name)  # type: ignore[assignment]
    return module


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The parser, with only `command`'s sub-parser configured (the others are named only);
    `command="*"` configures them all (shell completion, the help tests)."""
    parser = _top_parser()
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub = subs.add_parser(name, help=help_text, description=help_text)
        if command in (name, "*"):
            _load(name).configure(sub)
            # after the command as well as before it; SUPPRESS: absent, it leaves the top's
            sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks for errors (as orch --debug)")
    return parser


def _command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    owner: argparse.ArgumentParser = subs.choices.get(command, parser) if command else parser
    return owner


def _refuse_habits(parser: argparse.ArgumentParser, command: str | None, argv: list[str]) -> None:
    """Ansible's and vLLM's options, said as what orch uses instead (cli_hints.py)."""
    if command == "sim":
        return  # `orch sim serve` takes vLLM's own flags, verbatim
    from orchestrator.cli_hints import habit, logs_follow

    said = habit(argv) or (logs_follow(argv) if command == "logs" else None)
    if said is not None:
        _command_parser(parser, command).error(said)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse reports unknown options from the top parser; report them from the command's."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


class _PipeSafe(io.TextIOWrapper):
    """stdout that a closed pipe (`orch runs | head -1`) silences instead of failing: the
    command goes on (an apply must not stop half-way because its reader left) and keeps
    its exit code. Any other write failure (a full disk, `> /dev/full`) silences it too and
    is kept in `failed`, for main() to report as an error."""

    closed_pipe = False
    failed: OSError | None = None

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return super().write(text)
            except BrokenPipeError:
                self._silence()
            except OSError as error:
                self._fail(error)
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                super().flush()
            except BrokenPipeError:
                self._silence()
            except OSError as error:
                self._fail(error)

    def _fail(self, error: OSError) -> None:
        self.failed = self.failed or error
        self._silence()

    def _silence(self) -> None:
        self.closed_pipe = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.fileno())  # so the interpreter's own flush at exit is quiet
        os.close(devnull)


def _pipe_safe_stdout() -> None:
    out = sys.stdout
    if isinstance(out, _PipeSafe) or not isinstance(out, io.TextIOWrapper) or out is not sys.__stdout__:
        return  # already wrapped, or captured (tests): leave it alone
    out.flush()
    sys.stdout = _PipeSafe(
        out.detach(), encoding=out.encoding, errors=out.errors, line_buffering=out.line_buffering)


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


def _output_written(code: int) -> int:
    """`code`, or 1 when stdout could not take the output (a full disk)."""
    out = sys.stdout
    if isinstance(out, _PipeSafe):
        out.flush()
        if out.failed is not None:
            print(f"error: cannot write the output: {out.failed.strerror or out.failed}",
                  file=sys.stderr)
            return code or 1
    return code


def take_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal or ssh session) end a run as Ctrl-C does, and
    an interrupt is never lost: one raised while a finaliser runs (a weakref callback, a
    `__del__`) is only printed as "Exception ignored" by Python, so it is sent again to the
    main thread, from a new thread that the hook does not wait for (raised inside the hook,
    it would be ignored as well). Main thread only."""
    from orchestrator.errors import Interrupted

    def terminated(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, terminated)
    signal.signal(signal.SIGHUP, terminated)
    main = threading.get_ident()
    unraisable = sys.unraisablehook

    def redeliver(what: typing.Any) -> None:
        if isinstance(what.exc_value, KeyboardInterrupt):
            signum: int = getattr(what.exc_value, "signum", signal.SIGINT)
            # Thread.start() would wait for the thread, inside the hook
            _thread.start_new_thread(signal.pthread_kill, (main, signum))
        else:
            unraisable(what)

    sys.unraisablehook = redeliver


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _pipe_safe_stdout()
    command = _first_command(argv)
    parser = build_parser(command)
    _refuse_habits(parser, command, argv)
    args = _parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    debug = args.debug or os.environ.get("ORCH_DEBUG") == "1"
    _quiet_libraries(debug)
    from orchestrator.errors import Interrupted, OrchError

    if threading.current_thread() is threading.main_thread():
        take_signals()
    try:
        code = _load(args.command).run(args)
        return _output_written(code)
    except OrchError as error:
        if debug:
            raise
        from orchestrator.console import shown
        from orchestrator.masking import mask

        print(f"error: {shown(mask(str(error)))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as stopped:
        if debug:
            raise
        signum = stopped.signum if isinstance(stopped, Interrupted) else signal.SIGINT
        print(f"interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # a closed pipe outside stdout (stderr): not an error either
        return ExitCode.OK


def entry() -> None:
    """The `orch` command: `main()`, then an exit that skips the interpreter's teardown of
    every loaded module (~50 ms of a no-op apply's 0.5 s). Only once nothing is left to
    wait for: atexit handlers run and the output is flushed first, and while a thread that
    is not a daemon still runs, the normal exit waits for it."""
    code = main()
    others = [t for t in threading.enumerate()
              if t is not threading.current_thread() and not t.daemon and t.is_alive()]
    if others:
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # a reader that went away: nothing more to say to it
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
