"""`orch completion bash|zsh|tcsh`: print a shell completion script (shtab), e.g.

    orch completion bash > /etc/bash_completion.d/orch
    orch completion zsh > "${fpath[1]}/_orch"

The script is static: completing costs the shell nothing, not an orch start-up.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).

SHELLS = ("bash", "zsh", "tcsh")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def _files_for_paths(parser: argparse.ArgumentParser) -> None:
    """Arguments typed as paths complete file names (plans, inventories, run folders)."""
    import shtab

    for action in parser._actions:
        if action.type is Path:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _files_for_paths(sub)


def run(args: argparse.Namespace) -> int:
    import shtab

    from orchestrator.cli import build_parser

    parser = build_parser("*")
    _files_for_paths(parser)
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
