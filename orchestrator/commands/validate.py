"""`orch validate PLAN...`: load each plan (layers, vars, models) and print one line per plan.
A plan with a `matrix:` has each variant loaded and compiled as `orch plan` would (an
invalid value, an `exclude` that matches nothing: an error at the matrix's line); one with a
`tune:` has each value of its space tried as a plan (tune/check.py).

Exit 0 when every plan is valid, 1 otherwise. `-f` and `--set` apply to every plan given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.plan.loader import LoadedPlan

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plans", nargs="+", type=Path, metavar="PLAN", help="plan file(s) (YAML)")
    parser.add_argument(
        "-f",
        "--overlay",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="overlay merged over each plan (repeatable)",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="set one value, e.g. --set service.port=8001 (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from orchestrator.apply.compile import check
    from orchestrator.console import shown
    from orchestrator.errors import PlanError
    from orchestrator.masking import mask
    from orchestrator.plan.loader import load_plan
    from orchestrator.plan.secrets import secret_names

    failed = 0
    for path in args.plans:
        try:
            loaded = load_plan(path, args.overlay, args.sets)
            check(loaded)  # what apply would compile: launch command, files, steps
            variants = _variants(loaded, path, args)
            tuned = _tune_values(loaded, path, args)
        except PlanError as error:
            if args.debug:
                raise
            failed += 1
            print(shown(mask(f"FAIL {path}\n{error}")), file=sys.stderr, flush=True)
            continue
        plan = loaded.plan
        details = [plan.name, f"{len(loaded.layers)} layer{'s' if len(loaded.layers) != 1 else ''}"]
        secrets = secret_names(plan)
        if secrets:
            details.append(f"secrets: {', '.join(secrets)}")
        if variants is not None:
            details.append(f"matrix: {variants} variant{'s' if variants != 1 else ''} checked")
        if tuned is not None:
            details.append(f"tune: {tuned} value{'s' if tuned != 1 else ''} checked")
        print(shown(mask(f"ok   {path} ({'; '.join(details)})")), flush=True)
    return 1 if failed else 0


def _variants(loaded: LoadedPlan, path: Path, args: argparse.Namespace) -> int | None:
    """How many variants the plan's matrix makes, each checked (None: no matrix)."""
    if loaded.plan.matrix is None:
        return None
    from orchestrator.matrix.expand import matrix_of

    matrix = matrix_of(loaded, path, args.overlay, args.sets)
    return len(matrix.variants) if matrix is not None else None


def _tune_values(loaded: LoadedPlan, path: Path, args: argparse.Namespace) -> int | None:
    """How many values of the plan's tune space were checked as plans (None: no tune:)."""
    if loaded.plan.tune is None:
        return None
    from orchestrator.tune.check import check_space

    return check_space(path, args.overlay, args.sets, loaded)
