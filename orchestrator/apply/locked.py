"""What an apply takes from an earlier run: `--locked RUN` (its plan and each host's frozen
package set) and `--resume RUN|latest` (the unfinished run folder to continue)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator import local_files
from orchestrator.errors import OrchError, RunFolderError, UsageError
from orchestrator.holder import printable
from orchestrator.inventory import Inventory
from orchestrator.plan.layers import dotted
from orchestrator.plan.loader import LoadedPlan
from orchestrator.plan.models import Plan
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import frozen_set, list_runs, model_record, read_meta
from orchestrator.runs.run_records import Meta

SHOWN = 5  # differences a refused --resume names before "and N more"


@dataclass
class Locked:
    """What `--locked RUN_FOLDER` pins: the earlier run's plan and per-host freeze."""

    folder: Path
    freeze: dict[str, list[str]]  # host -> name==version lines
    commits: dict[str, str] = field(default_factory=dict)  # host -> the model's commit (model.json)
    plan: str = ""  # the plan meta.json says the run applied
    unfrozen: list[str] = field(default_factory=list)  # hosts of the run without a freeze.txt
    repos: dict[str, str] = field(default_factory=dict)  # host -> the repo its model.json names


def load_locked(folder: Path) -> tuple[Path, Locked]:
    """The run's plan file and what it froze, each record checked against the others: a
    folder edited by hand is refused at the file (and line) that does not fit."""
    meta = read_meta(folder)  # a located error when it is not JSON or not a run's
    layout = RunLayout(folder)
    plan_file = layout.plan
    if not plan_file.is_file():
        raise RunFolderError(f"{folder} has no plan.yaml to redeploy")
    _hosts_match(folder, meta.hosts)
    freeze: dict[str, list[str]] = {}
    unfrozen: list[str] = []
    for host in meta.hosts:
        lines = frozen_set(folder, host)
        if lines is None:
            unfrozen.append(host)
        else:  # orch itself comes from the controller's build (orch step), not an index
            freeze[host] = [line for line in lines if not line.startswith("orch==")]
    if not freeze:
        raise RunFolderError(
            f"{folder} froze no package set (no hosts/*/freeze.txt)",
            hint="use the run folder of an apply that completed the python step",
        )
    records = {host: model_record(folder, host, strict=True) for host in meta.hosts}
    found = {host: record for host, record in records.items() if record is not None}
    return plan_file, Locked(
        folder=folder, freeze=freeze, plan=meta.plan, unfrozen=unfrozen,
        commits={host: str(record["commit"]) for host, record in found.items()},
        repos={host: str(record["repo"]) for host, record in found.items()})


def _hosts_match(folder: Path, hosts: list[str]) -> None:
    """Every folder under hosts/ is a host meta.json lists (a freeze.txt copied in for
    another host is not redeployed quietly, nor ignored quietly)."""
    layout = RunLayout(folder)
    if not layout.hosts_dir.is_dir():
        return
    for entry in sorted(layout.hosts_dir.iterdir()):
        if entry.is_dir() and entry.name not in hosts:
            raise RunFolderError(
                f"{entry}: {entry.name!r} is not a host of the run ({layout.meta} lists: "
                f"{', '.join(hosts) or 'none'})",
                hint="the folder was edited: a locked apply redeploys only what its run froze")


def check_plan(locked: Locked, plan: Plan, plan_file: Path, inventory: Inventory) -> str | None:
    """The run's plan.yaml against its meta.json and model.json; a note to print when the
    plan names hosts the run did not freeze (a run with --limit: they are left alone)."""
    if locked.plan and plan.name != locked.plan:
        raise RunFolderError(f"{plan_file}:1: the plan is named {plan.name!r}, but "
                             f"{RunLayout(locked.folder).meta} says the run applied "
                             f"{locked.plan!r}", hint="the folder was edited: put it back")
    for host, repo in locked.repos.items():
        model = RunLayout(locked.folder).host(host).model
        if plan.model is None:
            raise RunFolderError(f"{model}: the run's plan fetches no model, but this names "
                                 f"{repo!r}", hint="the folder was edited: put it back")
        if repo != plan.model.repo:
            raise RunFolderError(f"{model}: names the repo {repo!r}, but {plan_file} fetches "
                                 f"{plan.model.repo!r}", hint="the folder was edited: put it back")
    try:
        named = inventory.select(plan.hosts)
    except OrchError:  # a host gone from the inventory: the names as the plan writes them
        named = [plan.hosts] if isinstance(plan.hosts, str) else list(plan.hosts)
    others = [host for host in named if host not in locked.freeze and host not in locked.unfrozen]
    if not others:
        return None
    return (f"note: {plan_file} names {', '.join(others)} too, which the run did not run on: "
            f"the locked apply redeploys {', '.join(locked.freeze)} only")


def locked_hosts(locked: Locked, inventory: Inventory, limit: list[str]) -> list[str]:
    """A locked apply targets the hosts the run froze (narrowed by --limit): each host gets
    its own frozen set, never another host's."""
    frozen = list(locked.freeze)
    if limit:
        unknown = [host for host in limit if host not in locked.freeze]
        if unknown:
            raise RunFolderError(
                f"--limit names {', '.join(unknown)}, which {locked.folder} froze no package "
                f"set for (it froze: {', '.join(frozen)})",
                hint="a locked apply reinstalls a host's own frozen set; pick among those hosts",
            )
        frozen = [host for host in frozen if host in limit]
    elif locked.unfrozen:
        missing = RunLayout(locked.folder).host(locked.unfrozen[0]).freeze
        raise RunFolderError(
            f"{missing} is missing: the run ran on {', '.join(locked.unfrozen)} (its meta.json "
            "says) but froze no package set there, so a locked apply cannot redeploy it",
            hint=f"--limit {','.join(frozen)} redeploys the hosts it froze")
    inventory.select(frozen)  # each must still be in the inventory (a located error if not)
    return frozen


def resumable(which: str, plan_name: str, root: Path) -> Path:
    """The run folder `--resume` continues: the one named, or the plan's latest that did not
    complete. A run that completed has nothing left to run (check_resume says it again once
    the folder is locked)."""
    if which == "latest":
        unfinished = [run for run in reversed(list_runs(root))
                      if run.parent.name == plan_name and read_meta(run).status != "complete"]
        if not unfinished:
            raise UsageError(f"--resume: plan {plan_name} has no unfinished run under {root}",
                             hint="apply without --resume to start a new run")
        return unfinished[0]
    path = Path(which)
    if (path / "matrix.json").is_file():  # runs/matrix_file.py's FILE
        raise UsageError(f"--resume {which}: that is a matrix run, and plan {plan_name} has no "
                         "matrix", hint="resume it with the plan that has the matrix")
    read_meta(path)  # a RunFolderError says what is wrong with it
    return path


def check_resume(which: str, folder: Path, meta: Meta, loaded: LoadedPlan,
                 resolved: str) -> None:
    """Whether the run (its folder locked for this apply, nothing written yet) may be
    continued: unfinished, of this plan, and the very plan it ran (its digest, and its
    plan.yaml against `resolved`, this plan as it would be written), each difference named."""
    if meta.plan != loaded.plan.name:
        raise UsageError(f"--resume {which}: that run is of plan {meta.plan!r}, not "
                         f"{loaded.plan.name!r}")
    if meta.status == "complete":
        raise UsageError(f"--resume {which}: that run completed; nothing is left to run")
    ran = RunLayout(folder).plan
    try:
        written = local_files.read_text(ran, max_bytes=8 << 20, errors="replace") \
            if os.path.lexists(ran) else None
    except OSError as error:
        raise RunFolderError(f"cannot read {ran}: {error.strerror or error}") from None
    if (not meta.plan_digest or meta.plan_digest == loaded.digest) and \
            written in (None, resolved):
        return
    raise UsageError(f"--resume {which}: the plan changed since that run: "
                     f"{_differences(ran, written, resolved)}",
                     hint="apply without --resume to start a new run of the plan as it is "
                          f"now, or put the plan back as it was ({ran})")


def _differences(ran: Path, written: str | None, resolved: str) -> str:
    """The first differences between the plan the run ran and this one, said."""
    if written is None:
        return f"its digest differs from the run's ({ran} is missing)"
    try:
        before, after = dotted(yaml.safe_load(written)), dotted(yaml.safe_load(resolved))
    except yaml.YAMLError:
        return f"the plan as resolved now differs from {ran}"
    said = [f"{key}: {_shown(before.get(key))} -> {_shown(after.get(key))}"
            for key in sorted(before.keys() | after.keys()) if before.get(key) != after.get(key)]
    more = f"; and {len(said) - SHOWN} more" if len(said) > SHOWN else ""
    return ", ".join(said[:SHOWN]) + more if said else \
        f"the plan as resolved now differs from {ran}"


def _shown(value: Any) -> str:
    text = "(unset)" if value is None else value if isinstance(value, str) else \
        json.dumps(value, default=str)
    return printable(text, 60) + ("..." if len(text) > 60 else "")
