"""`orch diff PLAN_A PLAN_B`: what changed across a pivot in the resolved plans (model,
quantization, parallelism, engine, pins, env, flags, bench, other).

Each side is a plan file (loaded with its layers), a run folder (its plan.yaml, as applied)
or a plan name (the plan.yaml of its latest complete run under --runs-dir).
With --exit-code: exit 0 when the plans are the same, 2 when they differ (as `orch plan
--detailed-exitcode` exits 2 when changes are pending; 1 stays "error").
"""

from __future__ import annotations

import argparse
from pathlib import Path

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan_a", metavar="PLAN_A", help="plan file, run folder or plan name")
    parser.add_argument("plan_b", metavar="PLAN_B", help="plan file, run folder or plan name")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), metavar="DIR", help="root of the run folders (default: runs)"
    )
    parser.add_argument("--json", action="store_true",
                        help="print the changes as JSON (category, setting, before, after)")
    parser.add_argument("--exit-code", action="store_true", help="exit 2 when the plans differ (0 when the same)")


def run(args: argparse.Namespace) -> int:
    import sys

    from orchestrator.console import make_console
    from orchestrator.exit_codes import ExitCode
    from orchestrator.report.plan_diff import diff_plans, diff_table
    from orchestrator.report.plan_source import read_plan
    from orchestrator.tables import to_rich

    a = read_plan(args.plan_a, args.runs_dir)
    b = read_plan(args.plan_b, args.runs_dir)
    changes = diff_plans(a.plan, b.plan)
    for side in (a, b):
        if side.problem:  # the plans still compare; the weights row is left out
            print(f"warning: {side.problem}; the weights it served are not compared",
                  file=sys.stderr)
    if a.weights and b.weights and a.weights != b.weights:  # two runs made on other weights
        from orchestrator.report.plan_diff import Change

        changes.insert(0, Change("model", "weights (the commit the runs served)", a.weights,
                                 b.weights))
    if args.json:
        import dataclasses

        from orchestrator.masking import dumps

        payload = {"a": a.label, "b": b.label,
                   "changes": [dataclasses.asdict(change) for change in changes]}
        sys.stdout.write(dumps(payload, indent=2) + "\n")
    else:
        console = make_console()
        console.print(to_rich(diff_table(a.plan, b.plan, changes, labels=(a.label, b.label)),
                              console.width))
    return ExitCode.CHANGES if args.exit_code and changes else ExitCode.OK
