"""`orch compare RUN|PLAN ...`: runs side by side, the first as the baseline.

One matrix run (its folder, or a plan whose runs hold one: its latest) compares its variants,
labelled by the values that vary, and names the best for the matrix's objective
(report/matrix.py).

A RUN is a run folder, an `orch bench` result directory, or `vllm bench serve` result files
(one file, or a directory of them: runs/result_sources.py); a PLAN is a plan name (or plan
file) and means its latest complete run with benchmark results under --runs-dir. Prints the
tables (and the comparability warnings); --json prints the figures instead; --plots DIR also
writes the PNG plots.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.report.comparison import Comparison

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
    parser.add_argument("--host", default=None, help="only this host's benchmark (runs with several hosts)")
    parser.add_argument("--wall-time", action="store_true", help="simulated runs in wall time, not model time")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="also write the plots (PNG) into DIR")


def run(args: argparse.Namespace) -> int:
    import sys

    from orchestrator.masking import dumps, mask
    from orchestrator.report.comparison import compare_runs
    from orchestrator.runs.layout import refuse_inside_run
    from orchestrator.runs.sources import resolve_run

    if args.plots is not None:
        refuse_inside_run(args.plots, "--plots")
    if len(args.refs) == 1:
        from orchestrator.report.matrix import matrix_ref

        folder = matrix_ref(args.refs[0], args.runs_dir)
        if folder is not None:
            return _matrix(args, folder)
    paths = [resolve_run(ref, args.runs_dir) for ref in args.refs]
    comparison = compare_runs(paths, model_time=not args.wall_time, host=args.host)
    written: list[Path] = []
    if args.plots is not None:
        written = _write_plots(comparison, args.plots)
    if args.json:
        sys.stdout.write(dumps(comparison.to_json(), indent=2) + "\n")
        return 0
    from orchestrator.console import make_console
    from orchestrator.report.compare_tables import captions, comparison_tables
    from orchestrator.report.plateaus import plateau_lines
    from orchestrator.tables import split_groups, to_rich

    console = make_console()
    for table in comparison_tables(comparison):
        for part in split_groups(table):
            console.print(to_rich(part, console.width))
    console.print(mask(captions(comparison)), markup=False, soft_wrap=True)
    for line in plateau_lines(comparison.series):
        console.print(mask(line), markup=False, soft_wrap=True)
    for warning in comparison.warnings:
        console.print(mask(f"warning: {warning}"), style="yellow", markup=False)
    for path in written:
        console.print(mask(f"plot: {path}"), markup=False, soft_wrap=True)
    return 0


def _matrix(args: argparse.Namespace, folder: Path) -> int:
    """A matrix run: its variants side by side, labelled by their values, and the best."""
    import sys

    from orchestrator.console import make_console
    from orchestrator.masking import dumps, mask
    from orchestrator.report.compare_tables import captions, comparison_tables
    from orchestrator.report.matrix import compare_matrix, matrix_table, reasons
    from orchestrator.tables import split_groups, to_rich

    matrix = compare_matrix(folder, model_time=not args.wall_time, host=args.host)
    written: list[Path] = []
    if args.plots is not None and matrix.comparison is not None:
        written = _write_plots(matrix.comparison, args.plots)
    if args.json:
        sys.stdout.write(dumps(matrix.to_json(), indent=2) + "\n")
        return 0
    console = make_console()
    console.print(mask(f"matrix {matrix.record.plan}: {folder} ({matrix.record.status})"),
                  markup=False, soft_wrap=True)
    if matrix.comparison is not None:
        for table in comparison_tables(matrix.comparison):
            for part in split_groups(table):
                console.print(to_rich(part, console.width))
    console.print(to_rich(matrix_table(matrix), console.width))
    for line in reasons(matrix):
        console.print(mask(line), markup=False, soft_wrap=True)
    if matrix.comparison is not None:
        console.print(mask(captions(matrix.comparison)), markup=False, soft_wrap=True)
        for warning in matrix.comparison.warnings:
            console.print(mask(f"warning: {warning}"), style="yellow", markup=False)
    console.print(mask(matrix.best_line()), markup=False, soft_wrap=True, style="bold")
    for path in written:
        console.print(mask(f"plot: {path}"), markup=False, soft_wrap=True)
    return 0


def _write_plots(comparison: Comparison, directory: Path) -> list[Path]:
    from orchestrator import local_files
    from orchestrator.errors import OrchError
    from orchestrator.report.plots import comparison_plots

    written = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for plot in comparison_plots(comparison):
            path = directory / f"{plot.name}.png"
            local_files.write_atomic(path, plot.png)
            written.append(path)
    except OSError as error:
        raise OrchError(f"cannot write the plots into {directory}: {error.strerror or error}") from None
    return written
