"""`orch report RUN|PLAN ...`: write one self-contained HTML page comparing the runs
(tables, plots, plan diffs, host facts) and print where it is.

One matrix run (its folder, or a plan whose runs hold one: its latest) gets the page of its
variants, labelled by the values that vary, with a matrix section first: the best variant
for the objective, why each ranks as it does, and a plot per metric with a line per variant."""

from __future__ import annotations

import argparse
from pathlib import Path

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "refs", nargs="+", metavar="RUN|PLAN",
        help="run folders or plan names, `orch bench` result directories, `vllm bench serve` "
             "result files (a file or a directory of them); the first is the baseline",
    )
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
    from orchestrator.runs.sources import resolve_run

    if args.output is not None:  # before any work; the default goes under <runs-dir>/reports
        refuse_inside_run(args.output, "-o")
    else:
        refuse_inside_run(args.runs_dir, "--runs-dir")
    matrix = None
    if len(args.refs) == 1:
        from orchestrator.report.matrix import compare_matrix, matrix_ref

        folder = matrix_ref(args.refs[0], args.runs_dir)
        if folder is not None:
            matrix = compare_matrix(folder, model_time=not args.wall_time, host=args.host)
    if matrix is not None:
        if matrix.comparison is None:
            from orchestrator.errors import RunFolderError

            raise RunFolderError(f"no variant of the matrix {matrix.folder} has benchmark results",
                                 hint=f"orch compare {matrix.folder} says why each one has none")
        comparison = matrix.comparison
    else:
        paths = [resolve_run(ref, args.runs_dir) for ref in args.refs]
        comparison = compare_runs(paths, model_time=not args.wall_time, host=args.host)
    out = args.output or default_report_path(args.runs_dir, comparison)
    written = write_report(comparison, out, matrix=matrix)
    print(mask(str(written)))
    return 0
