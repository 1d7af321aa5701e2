"""What an apply takes from an earlier run: `--locked RUN` (its plan and each host's frozen
package set) and `--resume RUN|latest` (the unfinished run folder to continue)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import RunFolderError, UsageError
from orchestrator.inventory import Inventory
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import frozen_sets, list_runs, model_records, read_meta


@dataclass
class Locked:
    """What `--locked RUN_FOLDER` pins: the earlier run's plan and per-host freeze."""

    folder: Path
    freeze: dict[str, list[str]]  # host -> name==version lines
    commits: dict[str, str] = field(default_factory=dict)  # host -> the model's commit (model.json)


def load_locked(folder: Path) -> tuple[Path, Locked]:
    plan_file = RunLayout(folder).plan
    freeze = {
        # orch itself comes from the controller's build (orch step), not from an index.
        host: [line for line in lines if not line.startswith("orch==")]
        for host, lines in frozen_sets(folder).items()
    }
    if not plan_file.exists():
        raise RunFolderError(f"{folder} has no plan.yaml to redeploy")
    if not freeze:
        raise RunFolderError(
            f"{folder} froze no package set (no hosts/*/freeze.txt)",
            hint="use the run folder of an apply that completed the python step",
        )
    commits = {host: str(record["commit"]) for host, record in model_records(folder).items()}
    return plan_file, Locked(folder=folder, freeze=freeze, commits=commits)


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
    inventory.select(frozen)  # each must still be in the inventory (a located error if not)
    return frozen


def resumable(which: str, plan_name: str, root: Path) -> Path:
    """The run folder `--resume` continues: the one named, or the plan's latest that did not
    complete. A run that completed has nothing left to run."""
    if which == "latest":
        unfinished = [run for run in reversed(list_runs(root))
                      if run.parent.name == plan_name and read_meta(run).status != "complete"]
        if not unfinished:
            raise UsageError(f"--resume: plan {plan_name} has no unfinished run under {root}",
                             hint="apply without --resume to start a new run")
        return unfinished[0]
    path = Path(which)
    meta = read_meta(path)  # a RunFolderError says what is wrong with it
    if meta.plan != plan_name:
        raise UsageError(f"--resume {which}: that run is of plan {meta.plan!r}, not {plan_name!r}")
    if meta.status == "complete":
        raise UsageError(f"--resume {which}: that run completed; nothing is left to run")
    return path
