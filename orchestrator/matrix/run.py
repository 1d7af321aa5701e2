"""`orch apply` and `orch plan` of a plan with a matrix.

apply runs the variants in the order that installs and restarts least (`run_order`), each a
normal apply (converge, replace the service, wait, smoke, sweep, collect) in its own run
folder, listed with its values in the matrix run's `matrix.json` (runs/matrix_file.py). A
variant that fails is recorded with its cause and the next one runs (`--fail-fast` stops
there); Ctrl-C marks the matrix interrupted, and `--resume` skips the variants that finished
and resumes the one that was cut (its finished levels kept, as a run's resume does).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from orchestrator.apply.run import ApplyOptions, execute
from orchestrator.console import make_console
from orchestrator.errors import OrchError, RunFolderError, UsageError
from orchestrator.exit_codes import ExitCode
from orchestrator.holder import Holder
from orchestrator.matrix import resume
from orchestrator.matrix.expand import MatrixPlan, Variant, run_order, short, transition
from orchestrator.matrix.preview import TAKES, changes, listing
from orchestrator.runs import matrix_file
from orchestrator.runs.layout import MatrixLayout, RunLayout
from orchestrator.runs.matrix_file import MatrixRecord, VariantEntry
from orchestrator.runs.reader import read_meta, read_record
from orchestrator.runs.run_records import HostSteps
from orchestrator.runs.writer import lock_folder, name_holder
from orchestrator.tables import Column, TableData, to_rich


def select(matrix: MatrixPlan, spec: str | None) -> set[int]:
    """The variants `--limit-variants SPEC` keeps: numbers and ranges (`1,3`, `2-4`) as
    `orch plan` numbers them, and filters on values (`max-num-seqs=64`: every filter must
    hold; a value with a comma goes on after it, `env.X=a,b`). None keeps them all."""
    every = {v.index for v in matrix.variants}
    if spec is None:
        return every
    numbers, filters = _read_selection(spec, len(every))
    axes = matrix.axes
    for key, _ in filters:
        if key not in axes and key not in [short(a, axes) for a in axes]:
            raise UsageError(f"--limit-variants {spec}: {key} is not an axis of the matrix "
                             f"(its axes: {', '.join(short(a, axes) for a in axes)})")

    def matches(variant: Variant) -> bool:
        for key, value in filters:
            axis = key if key in axes else next(a for a in axes if short(a, axes) == key)
            if axis not in variant.values:
                return False
            written = variant.values[axis]  # as the label shows it, or as JSON ("1" or 1)
            shown = written if isinstance(written, str) else json.dumps(written)
            if value not in (shown, json.dumps(written)):
                return False
        return True

    kept = {v.index for v in matrix.variants
            if (not numbers or v.index in numbers) and matches(v)}
    if not kept:
        raise UsageError(f"--limit-variants {spec}: no variant matches",
                         hint="orch plan PLAN lists the variants, their numbers and values")
    return kept


def _read_selection(spec: str, count: int) -> tuple[set[int], list[tuple[str, str]]]:
    """Numbers and `key=value` filters; an item that is neither goes on the value before
    it (a value holding a comma; a number there is a variant number)."""
    numbers: set[int] = set()
    filters: list[tuple[str, str]] = []
    after_filter = False
    for raw in spec.split(","):
        item = raw.strip()
        ranged = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if ranged:
            first, last = int(ranged[1]), int(ranged[2] or ranged[1])
            if last < first:
                raise UsageError(f"--limit-variants {spec}: {item} runs backwards "
                                 f"(write {last}-{first})")
            if first < 1 or last > count:  # checked before the range is made: 1-10**12
                raise UsageError(f"--limit-variants {spec}: the matrix has no variant "
                                 f"{first if first < 1 else last} (it has 1 to {count})")
            numbers.update(range(first, last + 1))
            after_filter = False
        elif "=" in item:
            key, _, value = item.partition("=")
            filters.append((key.strip(), value.strip()))
            after_filter = True
        elif item and after_filter:
            key, value = filters[-1]
            filters[-1] = (key, f"{value},{raw}".strip())
        elif item:
            raise UsageError(f"--limit-variants {spec}: cannot read {item!r}",
                             hint="give variant numbers (1,3 or 2-4, as orch plan lists them) "
                                  "or values (max-num-seqs=64)")
    if not numbers and not filters:
        raise UsageError(f"--limit-variants {spec!r}: names no variant",
                         hint="give variant numbers (1,3 or 2-4) or values (max-num-seqs=64)")
    return numbers, filters


def plan_matrix(matrix: MatrixPlan, options: ApplyOptions, *, limit: str | None = None) -> int:
    """The listing (of the variants `--limit-variants` keeps), then what apply would change
    first (check mode of the first of them)."""
    console = make_console(stderr=options.json_lines)
    chosen = select(matrix, limit)
    matrix = dataclasses.replace(matrix, variants=[v for v in matrix.variants if v.index in chosen])
    table, said = listing(matrix, options.runs_dir)
    console.print(to_rich(table, console.width))
    for line in said:
        console.print(line, soft_wrap=True, markup=False)
    first = run_order(matrix.variants)[0]
    console.print(f"\nthe first variant ({matrix.label(first)}), as apply would find the hosts "
                  "now:", markup=False)
    return execute(dataclasses.replace(options, sets=[*options.sets, *first.sets]),
                   first.loaded)


def apply_matrix(matrix: MatrixPlan, options: ApplyOptions, *, fail_fast: bool = False,
                 limit: str | None = None) -> int:
    console = make_console(stderr=options.json_lines)
    chosen = select(matrix, limit)
    order = run_order(matrix.variants)
    folder, record, lock = _open(console, matrix, options, order, chosen)
    try:
        return _apply(console, matrix, options, order, chosen, folder, record, fail_fast)
    finally:
        os.close(lock)


def _open(console: Console, matrix: MatrixPlan, options: ApplyOptions, order: list[Variant],
          chosen: set[int]) -> tuple[Path, MatrixRecord, int]:
    """The matrix folder (resumed or new) and its record, the folder locked for this apply
    (held while the descriptor is open) before a byte of it is written: a matrix run another
    apply still runs is not resumed beside it."""
    holder = Holder.me(None, "apply")
    if options.resume is None:
        folder = matrix_file.new_folder(options.runs_dir, matrix.name, matrix.base.digest)
        lock = lock_folder(MatrixLayout(folder).lock, folder)
        name_holder(lock, dataclasses.replace(holder, run=str(folder)), MatrixLayout(folder).lock)
        record = _new_record(matrix, order, chosen, options)
        matrix_file.write(folder, matrix_file.started(record))
        return folder, record, lock
    folder = resume.resumable(options.resume, matrix, options.runs_dir)
    lock = lock_folder(MatrixLayout(folder).lock, folder)
    try:
        record = matrix_file.read(folder)
        resume.check_same(record, matrix, folder)
        resume.bind_runs(folder, record)
        if record.status == "complete":  # it completed while this apply waited for it
            raise UsageError(f"--resume {options.resume}: that matrix run completed; nothing "
                             "is left to run")
    except BaseException:
        os.close(lock)
        raise
    name_holder(lock, dataclasses.replace(holder, run=str(folder)), MatrixLayout(folder).lock)
    matrix_file.resumed(folder, record)
    console.print(f"resuming the matrix run in {folder}", soft_wrap=True, markup=False)
    return folder, record, lock


def _apply(console: Console, matrix: MatrixPlan, options: ApplyOptions, order: list[Variant],
           chosen: set[int], folder: Path, record: MatrixRecord, fail_fast: bool) -> int:
    running = [v for v in order if v.index in chosen]
    console.print(f"matrix {matrix.name}: {len(running)} of {len(order)} variants, in this "
                  f"order: {', '.join(str(v.index) for v in running)}; matrix run: "
                  f"{folder / matrix_file.FILE}", soft_wrap=True, markup=False)
    previous = None
    failed = 0
    for position, variant in enumerate(running, 1):
        entry = record.variant(variant.index)
        takes = transition(previous, variant.plan)
        previous = variant.plan
        done = _finished(entry)
        if done:
            console.print(f"\nvariant {variant.index} ({matrix.label(variant)}): finished "
                          f"before in {entry.run}, kept", soft_wrap=True, markup=False)
            continue
        _header(console, matrix, variant, position, len(running), takes, order[0])
        failed += not _run_variant(console, matrix, variant, entry, record, folder, options)
        if failed and fail_fast:
            console.print(f"--fail-fast: variant {variant.index} failed; the matrix stops "
                          "here", markup=False)
            break
    complete = all(record.variant(i).status == "complete" for i in chosen)
    matrix_file.finish(folder, record, "complete" if complete else "failed")
    _recap(console, record, folder)
    return ExitCode.OK if complete else ExitCode.ERROR


def _new_record(matrix: MatrixPlan, order: Sequence[Variant], chosen: set[int],
                options: ApplyOptions) -> MatrixRecord:
    previous = None
    entries = []
    for variant in order:
        takes = transition(previous, variant.plan)
        previous = variant.plan
        entries.append(VariantEntry(
            index=variant.index, label=matrix.label(variant), values=variant.values,
            sets=variant.sets, digest=variant.loaded.digest, step=takes,
            status="pending" if variant.index in chosen else "skipped"))
    return MatrixRecord(
        plan=matrix.name, plan_file=str(options.plan) if options.plan else None,
        layers=matrix.base.layers, axes=matrix.axes, varying=matrix.varying,
        objective=matrix.objective.text if matrix.objective else None, variants=entries)


def _header(console: Console, matrix: MatrixPlan, variant: Variant, position: int, count: int,
            takes: str, first: Variant) -> None:
    console.rule(f"variant {variant.index} ({position} of {count}): {matrix.label(variant)}",
                 align="left")
    lines = changes(first.plan, variant.plan) if variant is not first else []
    console.print(f"{TAKES[takes]}" + (f"; against variant {first.index}: " + "; ".join(lines)
                                       if lines else ""), soft_wrap=True, markup=False)


def _run_variant(console: Console, matrix: MatrixPlan, variant: Variant, entry: VariantEntry,
                 record: MatrixRecord, folder: Path, options: ApplyOptions) -> bool:
    """Apply one variant; True when it completed. Its entry is rewritten as it goes."""
    started = time.monotonic()
    resume = entry.run if entry.run and _exists(entry.run) else None
    entry.status, entry.cause = "running", None
    matrix_file.write(folder, record)

    def on_folder(path: Path) -> None:
        entry.run = str(path)
        matrix_file.write(folder, record)

    variant_options = dataclasses.replace(
        options, sets=[*options.sets, *variant.sets], resume=resume, on_folder=on_folder)
    cause = None
    try:
        code = execute(variant_options, variant.loaded)
    except KeyboardInterrupt:
        entry.status, entry.seconds = "interrupted", matrix_file.elapsed(started)
        matrix_file.finish(folder, record, "interrupted")
        console.print(f"matrix interrupted in variant {variant.index}; resume it with: orch "
                      f"apply {options.plan} --resume {folder}", soft_wrap=True, markup=False)
        raise
    except OrchError as error:
        code, cause = ExitCode.ERROR, str(error).splitlines()[0]
    entry.seconds = matrix_file.elapsed(started)
    if code == ExitCode.OK:
        entry.status = "complete"
    else:
        entry.status = "failed"
        entry.cause = cause or _cause(entry.run) or f"apply exited {code}"
        console.print(f"variant {variant.index} ({matrix.label(variant)}) failed: "
                      f"{entry.cause}", soft_wrap=True, markup=False, style="red")
    matrix_file.write(folder, record)
    return entry.status == "complete"


def _exists(run: str) -> bool:
    return RunLayout(Path(run)).meta.is_file()


def _finished(entry: VariantEntry) -> bool:
    """Whether the variant's run completed (its own meta.json says, whatever the matrix
    record last said: orch may have been killed between the two)."""
    if not entry.run or not _exists(entry.run):
        return False
    try:
        complete = read_meta(Path(entry.run)).status == "complete"
    except RunFolderError:
        return False
    if complete:
        entry.status = "complete"
    return complete


def _cause(run: str | None) -> str | None:
    """The first failed step of a variant's run, as its steps.json says."""
    if not run or not _exists(run):
        return None
    try:
        for host in read_meta(Path(run)).hosts:
            steps_file = RunLayout(Path(run)).host(host).steps
            if not steps_file.exists():
                continue
            steps = read_record(steps_file, HostSteps)
            failed = next((s for s in steps.steps if s.status == "failed"), None)
            if failed is not None:
                return f"{host}: {failed.step}: {_said(failed.error or 'failed')}"
            if steps.error:
                return f"{host}: {steps.error.strip().splitlines()[0]}"
    except RunFolderError:
        return None
    return None


def _said(error: str) -> str:
    """An error's first line, with the last line of the log it quotes that says "error"
    (the server's own reason: `argument --max-num-seqs: expected ...`)."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return "failed"
    said = lines[0].removeprefix("localhost: ")
    errors = [line for line in lines[1:] if "error" in line.lower()]
    return f"{said}; the log says: {errors[-1]}" if errors else said


def _recap(console: Console, record: MatrixRecord, folder: Path) -> None:
    table = TableData(
        f"Matrix {record.plan}",
        [Column("#", "right"), Column("Variant"), Column("Status"),
         Column("Run folder", prose=True, priority=1), Column("Time", "right", priority=2)],
    )
    for entry in record.variants:
        status = entry.status + (f": {entry.cause}" if entry.cause else "")
        table.add([str(entry.index), entry.label, status, entry.run or "-",
                   f"{entry.seconds:.1f}s" if entry.seconds is not None else "-"])
    console.print(to_rich(table, console.width))
    console.print(f"matrix run: {folder / matrix_file.FILE}; compare the variants with: orch "
                  f"compare {folder}", soft_wrap=True, markup=False)
