"""`orch schema`: print the plan's JSON Schema (for editors; see docs/plans.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of stdout"
    )


def run(args: argparse.Namespace) -> int:
    import json

    from orchestrator.plan.docs import json_schema

    text = json.dumps(json_schema(), indent=2) + "\n"
    if args.output is None:
        print(text, end="")
        return 0
    from orchestrator import local_files
    from orchestrator.errors import OrchError
    from orchestrator.runs.layout import refuse_inside_run

    refuse_inside_run(args.output, "-o")
    try:
        local_files.write_atomic(args.output, text)
    except OSError as error:
        raise OrchError(f"cannot write the schema to {args.output}: {error.strerror}",
                        hint="name a regular file, or leave out -o to print it") from None
    print(f"wrote {args.output}")
    return 0
