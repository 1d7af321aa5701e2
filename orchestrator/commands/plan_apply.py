"""`orch plan` (check mode) and `orch apply`: one code path, one write gate.

Exit codes of `orch plan`: 0 when it succeeded, whether or not changes are pending (as
Terraform's plan: `set -e` scripts go on), 1 error; with `--detailed-exitcode`, 2 when changes
are pending. `orch apply`: 0 or 1, 75 when the only failures are busy locks
(orchestrator/exit_codes.py has the table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.commands.plan_options import add_forks_option, add_plan_options, limit_hosts

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    check = parser.prog.endswith(" plan")
    add_plan_options(parser, plan_optional=True)
    parser.add_argument("--show-origin", action="store_true",
                        help="say which layer set each value of the plan")
    parser.add_argument("--json", action="store_true", help="print events as JSON lines")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"),
                        help="where run folders go (default ./runs)")
    parser.add_argument("--locked", type=Path, metavar="RUN_FOLDER",
                        help="exactly the package set an earlier run froze, on that run's hosts "
                             "(installed without dependency resolution)")
    parser.add_argument("--verify-all", action="store_true",
                        help="hash every installed file of the pinned packages against its "
                             "RECORD, ignoring the host's stat cache, and converge the install "
                             "in full even when it is unchanged since it last converged")
    if check:
        parser.add_argument("--detailed-exitcode", action="store_true",
                            help="exit 2 when changes are pending (0 when converged, 1 on an "
                                 "error), as terraform plan -detailed-exitcode")
    if not check:
        parser.add_argument("--wait", action="store_true",
                            help="wait while another apply holds the host's lock (default: fail "
                                 "at once, naming it)")
        parser.add_argument("--break-lock", action="store_true",
                            help="take over the host's apply lock whoever holds it (when that "
                                 "apply is known to be gone)")
        parser.add_argument("--resume", nargs="?", const="latest", default=None, metavar="RUN",
                            help="continue an interrupted or crashed run in its own run folder "
                                 "(default: the plan's latest unfinished run): finished "
                                 "benchmark levels are kept, the rest run; only with the plan "
                                 "it ran, never while another apply writes it")
        parser.add_argument("--skip", action="append", default=[], metavar="STAGE",
                            choices=["service", "smoke", "bench"],
                            help="skip a stage after converge: service, smoke or bench "
                             "(repeatable; service skips all three)")
        parser.add_argument("--fail-fast", action="store_true",
                            help="a plan with a matrix: stop at the first variant that fails "
                                 "(default: record its cause and run the next)")
    parser.add_argument("--limit-variants", metavar="SPEC", default=None,
                        help="a plan with a matrix: only these variants, by number as orch "
                             "plan lists them (1,3 or 2-4) or by value (max-num-seqs=64)")
    add_forks_option(parser)
    parser.set_defaults(check=check, parser=parser)


def run(args: argparse.Namespace) -> int:
    from orchestrator.exit_codes import ExitCode

    code = _converge(args)
    if args.check and code == ExitCode.CHANGES and not args.detailed_exitcode:
        return ExitCode.OK  # pending changes are a successful plan's news, not a failure
    return code


def _converge(args: argparse.Namespace) -> int:
    from orchestrator.apply.run import ApplyOptions, execute

    limit = limit_hosts(args)
    options = ApplyOptions(
        plan=args.plan,
        inventory=args.inventory,
        limit=limit,
        overlays=list(args.overlay),
        sets=list(args.sets),
        show_origin=args.show_origin,
        json_lines=args.json,
        check=args.check,
        runs_dir=args.runs_dir,
        locked=args.locked,
        skip=set(getattr(args, "skip", [])),
        verify_all=args.verify_all,
        wait=getattr(args, "wait", False),
        break_lock=getattr(args, "break_lock", False),
        resume=getattr(args, "resume", None),
        forks=args.forks,
    )
    if (options.plan is None) == (options.locked is None):
        args.parser.error("give a PLAN, or --locked RUN_FOLDER (which holds its plan)")
    if options.plan is None:
        return execute(options)  # --locked: the plan is the locked run's, loaded there
    from orchestrator.matrix.expand import matrix_of
    from orchestrator.plan.loader import load_plan

    # loaded once: whether it has a matrix, and (without one) the plan the apply runs
    loaded = load_plan(options.plan, options.overlays, options.sets)
    matrix = matrix_of(loaded, options.plan, options.overlays, options.sets)
    if matrix is not None:
        from orchestrator.matrix.run import apply_matrix, plan_matrix

        if options.check:
            return plan_matrix(matrix, options, limit=args.limit_variants)
        return apply_matrix(matrix, options, fail_fast=args.fail_fast,
                            limit=args.limit_variants)
    return execute(options, loaded)
