"""`orch plan` (check mode) and `orch apply`: one code path, one write gate.

Exit codes of `orch plan`: 0 converged, 2 changes pending, 1 error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    check = parser.prog.endswith(" plan")
    parser.add_argument("plan", nargs="?", type=Path, help="plan file (YAML); not with --locked")
    parser.add_argument("-i", "--inventory", type=Path, help="inventory file (default inventory/local.yaml)")
    parser.add_argument("--limit", action="append", default=[], metavar="HOST",
                        help="only these hosts (repeat, or comma-separated)")
    parser.add_argument("-f", "--overlay", action="append", type=Path, default=[],
                        metavar="FILE", help="overlay merged over the plan (repeatable)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                        help="set one value, e.g. --set service.port=8001 (repeatable)")
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
                             "RECORD, ignoring the host's stat cache")
    if not check:
        parser.add_argument("--wait", action="store_true",
                            help="wait while another apply holds the host's lock (default: fail "
                                 "at once, naming it)")
        parser.add_argument("--break-lock", action="store_true",
                            help="take over the host's apply lock whoever holds it (when that "
                                 "apply is known to be gone)")
        parser.add_argument("--skip", action="append", default=[], metavar="PHASE",
                            choices=["service", "smoke", "bench"],
                            help="skip a phase after converge (repeatable)")
    parser.set_defaults(check=check)


def run(args: argparse.Namespace) -> int:
    from orchestrator.apply import ApplyOptions, execute

    limit = [h for item in args.limit for h in item.split(",") if h]
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
    )
    if (options.plan is None) == (options.locked is None):
        print("error: give a PLAN, or --locked RUN_FOLDER (which holds its plan)", file=sys.stderr)
        return 1
    return execute(options)
