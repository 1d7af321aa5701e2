"""`orch apply PLAN --resume [MATRIX]` of a plan with a matrix: which matrix run it continues,
and whether it may. A matrix run continues only with the matrix it ran (the same variants,
each the same plan); what changed is said variant by variant. A variant's run folder is
always a sibling of the matrix folder (`runs/<plan>/`), so it is found from there whatever
the working folder, and a `run` edited by hand to lead anywhere else is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.errors import RunFolderError, UsageError
from orchestrator.matrix.expand import MatrixPlan, Variant
from orchestrator.report.plan_diff import diff_plans
from orchestrator.runs import matrix_file
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.matrix_file import MatrixRecord, VariantEntry
from orchestrator.runs.reader import load_plan_yaml, read_meta

# `<UTC time>-<hash8>` (runs/layout.py run_folder_name), `-N` for a second in one second
RUN_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}(?:-\d+)?")
SHOWN = 5  # differences named before "and N more"


def resumable(which: str, matrix: MatrixPlan, root: Path) -> Path:
    """The matrix folder `--resume` continues: the one named, or the plan's latest that did
    not complete."""
    if which == "latest":
        unfinished = [f for f in reversed(matrix_file.matrices(root, matrix.name))
                      if matrix_file.read(f).status != "complete"]
        if not unfinished:
            raise UsageError(f"--resume: plan {matrix.name} has no unfinished matrix run under "
                             f"{root}", hint="apply without --resume to start a new one")
        return unfinished[0]
    given = Path(which)
    if not given.exists():
        raise UsageError(f"--resume {which}: no such folder",
                         hint=f"orch runs lists the runs; --resume alone takes the plan's latest "
                              f"unfinished matrix run under {root}")
    folder = matrix_file.folder_of(given)
    if not matrix_file.is_matrix(folder):
        raise UsageError(f"--resume {which}: not a matrix run (no {matrix_file.FILE}); plan "
                         f"{matrix.name} has a matrix, and --resume takes its matrix folder",
                         hint=_owner_hint(folder, matrix, root))
    record = matrix_file.read(folder)
    if record.plan != matrix.name:
        raise UsageError(f"--resume {which}: that matrix run is of plan {record.plan!r}, not "
                         f"{matrix.name!r}")
    if record.status == "complete":
        raise UsageError(f"--resume {which}: that matrix run completed; nothing is left to run")
    return folder


def _owner_hint(folder: Path, matrix: MatrixPlan, root: Path) -> str:
    """Which matrix run lists `folder` as a variant's run, when one does."""
    if RunLayout(folder).meta.is_file():
        for candidate in reversed(matrix_file.matrices(root, matrix.name)):
            try:
                listed = matrix_file.read(candidate).variants
            except RunFolderError:
                continue
            for entry in listed:
                if entry.run and Path(entry.run).name == folder.resolve().name:
                    return (f"that run folder is variant {entry.index} ({entry.label}) of the "
                            f"matrix run {candidate}: resume that")
        return "that is a run folder: resume it with a plan without a matrix"
    return f"the plan's matrix runs are runs/{matrix.name}/matrix-*/ under --runs-dir"


def check_same(record: MatrixRecord, matrix: MatrixPlan, folder: Path) -> None:
    """The matrix as it is now must be the one the record ran: each difference named."""
    written = {entry.index: entry for entry in record.variants}
    now = {variant.index: variant for variant in matrix.variants}
    said: list[str] = []
    edited: list[str] = []  # how each variant's plan changed where its values did not
    for index in sorted(written.keys() | now.keys()):
        entry, variant = written.get(index), now.get(index)
        if entry is None and variant is not None:
            said.append(f"variant {index} ({matrix.label(variant)}) is new")
        elif variant is None and entry is not None:
            said.append(f"variant {index} ({entry.label}) is gone")
        elif entry is not None and variant is not None:
            if matrix_file.same_values(entry.values, variant.values):
                if entry.digest != variant.loaded.digest:
                    edited.append(_plan_change(entry, variant))
                    said.append(f"variant {index} ({entry.label}): {edited[-1]}")
            else:
                said.append(f"variant {index} was {entry.label}, now {matrix.label(variant)}")
    if len(edited) == len(said) == len(now) > 1 and len(set(edited)) == 1:
        said = [f"every variant: {edited[0]}"]
    if said:
        more = f"; and {len(said) - SHOWN} more" if len(said) > SHOWN else ""
        raise UsageError(f"--resume {folder}: the plan's matrix changed since that run: "
                         + "; ".join(said[:SHOWN]) + more,
                         hint="apply without --resume to run the matrix as it is now, or put "
                              "the plan back as it was")


def _plan_change(entry: VariantEntry, variant: Variant) -> str:
    """What changed in a variant's plan whose values did not (the base plan, an overlay,
    --set): the first differences against the plan its run applied, when it has one."""
    generic = "its plan changed (the base plan, an overlay or --set)"
    if not entry.run or not RunLayout(Path(entry.run)).plan.is_file():
        return generic
    try:
        changes = diff_plans(load_plan_yaml(RunLayout(Path(entry.run)).plan), variant.plan)
    except RunFolderError:
        return generic
    shown = [f"{c.setting}: {c.before or '(unset)'} -> {c.after or '(unset)'}"
             for c in changes[:3]]
    return f"{generic}: " + ", ".join(shown) if shown else generic


def bind_runs(folder: Path, record: MatrixRecord) -> None:
    """Point each variant's `run` at its folder beside the matrix folder (found from there,
    whatever the working folder), and refuse one edited to lead elsewhere or to another
    variant's run."""
    where = folder / matrix_file.FILE
    for position, entry in enumerate(record.variants):
        if not entry.run:
            continue
        written = Path(entry.run)
        beside = str(written.parent) in (".", "") or written.parent.name == folder.parent.name
        if not beside or not RUN_NAME.fullmatch(written.name):
            raise RunFolderError(
                f"{where}: variants.{position}.run: {entry.run!r} is not a run folder beside "
                f"the matrix run (runs/<plan>/<time>-<hash>); variant {entry.index} "
                f"({entry.label})", hint="the file was edited: put the run back as orch wrote it")
        run = folder.parent / written.name
        entry.run = str(run)
        if RunLayout(run).meta.is_file():
            _same_variant(where, position, entry, run)


def _same_variant(where: Path, position: int, entry: VariantEntry, run: Path) -> None:
    digest = read_meta(run).plan_digest
    if digest and entry.digest and digest != entry.digest:
        raise RunFolderError(
            f"{where}: variants.{position}.run: {run} ran another plan (digest {digest[:8]}) "
            f"than variant {entry.index} ({entry.label}, digest {entry.digest[:8]})",
            hint="the file was edited: put the run back as orch wrote it")
