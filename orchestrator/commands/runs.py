"""`orch runs [PLAN...]`: list run folders (plan, time, hosts, status, engine, headline
figures), oldest first. Exit 0; 1 when a folder named on the command line is unreadable."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plans", nargs="*", metavar="PLAN", help="only the runs of these plan names")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), metavar="DIR", help="root of the run folders (default: runs)"
    )
    parser.add_argument("--last", type=int, default=None, metavar="N", help="only the N newest runs")
    parser.add_argument("--json", action="store_true",
                        help="print the runs as JSON (figures as numbers, tok/s)")


def run(args: argparse.Namespace) -> int:
    from orchestrator.console import UNBOUNDED, make_console
    from orchestrator.masking import mask
    from orchestrator.report.listing import list_rows, runs_table
    from orchestrator.tables import to_rich

    console = make_console()
    rows = list_rows(args.runs_dir, args.plans)
    if args.last is not None:
        rows = rows[-args.last :] if args.last > 0 else []
    if args.json:
        import json

        sys.stdout.write(mask(json.dumps([row.to_json() for row in rows], indent=2)) + "\n")
        return 0
    if not rows:
        which = f" of {', '.join(args.plans)}" if args.plans else ""
        console.print(mask(f"no run folders{which} under {args.runs_dir}/"), markup=False)
        return 0
    # a pipe's lines are never wrapped, headers included (UNBOUNDED: not a terminal)
    console.print(to_rich(runs_table(rows, args.runs_dir), console.width,
                          wrap_headers=console.width < UNBOUNDED))
    for row in rows:
        if row.problem:
            console.print(mask(f"{row.path}: {row.problem}"), markup=False, style="yellow")
    return 0
