"""Options that Ansible's and vLLM's users type by habit, and what orch uses instead.

One table, read before argparse: `orch plan PLAN -e x=1` is a usage error that says
`--set`, not a bare "unrecognized arguments" (nor an `-e` value taken for the plan).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

_SET = "orch sets values with --set KEY=VALUE (repeatable), or -f FILE for a file of values"
_DEBUG = "orch has no verbosity levels: --debug shows library logs and tracebacks"

# the option as typed -> what orch uses instead (each tested in tests/core/test_cli_habits.py)
HINTS: dict[str, str] = {
    "-e": _SET,
    "--extra-vars": _SET,
    "-l": "orch narrows the hosts with --limit (host names, groups, or patterns such as 'gpu*')",
    "-v": _DEBUG,
    "--verbose": _DEBUG,
    "--check": "orch's check mode is a command of its own: orch plan PLAN",
    "--diff": "orch plan PLAN shows the differences apply would make (orch diff PLAN_A PLAN_B "
              "compares two plans)",
}

_VERBOSE = re.compile(r"^-v+$")  # -v, -vv, -vvv
_WITH_VALUE = re.compile(r"^(-[el])(?!-).+$")  # -ex=1, -lgpu1: a short option and its value


def habit(argv: Sequence[str]) -> str | None:
    """The first habit in `argv` (before a `--`), as "-e: what orch uses instead"."""
    for arg in argv:
        if arg == "--":
            return None
        shown = flag = arg.partition("=")[0] if arg.startswith("--") else arg
        if _VERBOSE.match(flag):
            flag = "-v"
        elif (attached := _WITH_VALUE.match(flag)) is not None:
            shown = flag = attached.group(1)
        if flag in HINTS:
            return f"{shown} is not an orch option; {HINTS[flag]}"
    return None


LOGS_FOLLOW = "-f is an overlay file here; to follow the log use --follow"


def logs_follow(argv: Sequence[str]) -> str | None:
    """`orch logs PLAN -f` means follow to a journalctl or tail user; in orch -f (on every
    plan command) is an overlay file. Said when what follows -f is not an existing file."""
    for position, arg in enumerate(argv):
        if arg == "--":
            return None
        if arg in ("-f", "--overlay"):
            value = argv[position + 1] if position + 1 < len(argv) else None
        elif arg.startswith("--overlay="):
            value = arg.partition("=")[2]
        elif arg.startswith("-f") and not arg.startswith("--"):
            value = arg[2:]
        else:
            continue
        if value is None or value.startswith("-"):
            return LOGS_FOLLOW
        if not os.path.isfile(value):
            return f"{LOGS_FOLLOW} (there is no file {value!r})"
    return None
