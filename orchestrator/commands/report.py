"""`orch report RUN|PLAN ...`: write one self-contained HTML page comparing the runs
(tables, plots, plan diffs, host facts) and print where it is."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("refs", nargs="+", metavar="RUN|PLAN", help="run folders or plan names; the first is the baseline")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), metavar="DIR", help="root of the run folders (default: runs)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, default=None, metavar="FILE",
        help="where to write the page (default: <runs-dir>/reports/<time>-<plans>.html)",
    )  # fmt: skip
    parser.add_argument("--host", default=None, help="only this host's benchmark (runs with several hosts)")
    parser.add_argument("--wall-time", action="store_true", help="simulated runs in wall time, not model time")


def run(args: argparse.Namespace) -> int:
    from orchestrator.masking import mask
    from orchestrator.report.comparison import compare_runs
    from orchestrator.report.html_report import default_report_path, write_report
    from orchestrator.runs.layout import refuse_inside_run
    from orchestrator.runs.reader import resolve_run

    if args.output is not None:  # before any work; the default goes under <runs-dir>/reports
        refuse_inside_run(args.output, "-o")
    else:
        refuse_inside_run(args.runs_dir, "--runs-dir")
    paths = [resolve_run(ref, args.runs_dir) for ref in args.refs]
    comparison = compare_runs(paths, model_time=not args.wall_time, host=args.host)
    out = args.output or default_report_path(args.runs_dir, comparison)
    written = write_report(comparison, out)
    print(mask(str(written)))
    return 0
