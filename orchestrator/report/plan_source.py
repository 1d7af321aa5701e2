"""Where `orch diff` gets a plan from: a plan file (loaded with its layers, as `orch apply`
would), a run folder (the plan.yaml it applied), or a plan name (the plan.yaml of its latest
complete run)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import OrchError, RunFolderError
from orchestrator.plan.models import Plan
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import (
    latest_complete,
    load_plan_yaml,
    model_record,
    read_meta,
    weights_of,
)


@dataclass(frozen=True)
class PlanRef:
    plan: Plan
    label: str  # how the table names it
    origin: Path  # the file it was read from
    weights: str | None = None  # a run's `repo@commit` (its model.json), when it has one
    problem: str | None = None  # why a run's model.json could not be read, if so


def read_plan(ref: str, runs_root: Path) -> PlanRef:
    path = Path(ref)
    if path.is_file():
        # the YAML loader only when a plan file is read (start-up time)
        from orchestrator.plan.loader import load_plan

        loaded = load_plan(path)
        return PlanRef(loaded.plan, loaded.plan.name, path)
    if path.is_dir():
        plan_file = RunLayout(path).plan
        if not plan_file.exists():
            raise RunFolderError(f"{path} holds no plan.yaml", hint="give a run folder or a plan file")
        plan = load_plan_yaml(plan_file)
        return PlanRef(plan, f"{plan.name} ({path.name})", plan_file, *_weights(path))
    if "/" in ref or ref.endswith((".yaml", ".yml")):
        raise RunFolderError(f"{ref}: no such plan file or run folder")
    folder = latest_complete(runs_root, ref)
    plan_file = RunLayout(folder).plan
    plan = load_plan_yaml(plan_file)
    return PlanRef(plan, f"{plan.name} ({folder.name})", plan_file, *_weights(folder))


def _weights(folder: Path) -> tuple[str | None, str | None]:
    """The weights a run served, when all its hosts agree (else each, joined); or why a
    model.json could not be read (the plans are still compared)."""
    try:
        hosts = read_meta(folder).hosts
        records = [model_record(folder, host, strict=True) for host in hosts]
    except OrchError as error:
        return None, str(error).splitlines()[0]
    found = sorted({w for r in records if (w := weights_of(r))})
    return ", ".join(found) or None, None
