"""One `orch plan` / `orch apply`: load, resolve secrets, select hosts, open the run folder,
converge every host, write artifacts, print the recap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from orchestrator.errors import PlanError, RunFolderError
from orchestrator.inventory import Inventory, load_inventory
from orchestrator.output import Reporter, recap_table
from orchestrator.plan.loader import LoadedPlan, load_plan, locate
from orchestrator.plan.models import Install, Plan
from orchestrator.plan.secrets import resolve_secrets, substitute
from orchestrator.plan.variables import render_vars
from orchestrator.runner import HostJob, HostOutcome, Phase, run_hosts
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import frozen_sets
from orchestrator.runs.records import HostFactsRecord, HostSteps
from orchestrator.runs.writer import RunFolder
from orchestrator.steps.base import Step
from orchestrator.steps.files import DesiredFile, FilesStep, render_files
from orchestrator.steps.python_env import PythonEnvStep


@dataclass
class ApplyOptions:
    plan: Path | None
    inventory: Path | None = None
    limit: list[str] = field(default_factory=list)
    overlays: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    show_origin: bool = False
    json_lines: bool = False
    check: bool = False
    runs_dir: Path = Path("runs")
    locked: Path | None = None
    skip: set[str] = field(default_factory=set)
    restart: bool = False  # `orch restart`: restart the service even when converged
    verify_all: bool = False  # hash every installed file against RECORD (no stat cache)


@dataclass
class Locked:
    """What `--locked RUN_FOLDER` pins: the earlier run's plan and per-host freeze."""

    folder: Path
    freeze: dict[str, list[str]]  # host -> name==version lines


def render_text(text: str, plan: Plan, secrets: dict[str, str]) -> str:
    """Fill `${vars.X}` (templates) and `${env:X}` (secrets) in text bound for a host."""
    return substitute(render_vars(text, plan.vars), secrets)


def build_steps(
    plan: Plan,
    base_dir: Path,
    secrets: dict[str, str],
    *,
    freeze: list[str] | None = None,
    with_service: bool = True,
    force_restart: bool = False,
    verify_all: bool = False,
) -> list[Step]:
    steps: list[Step] = []
    if plan.python is not None:
        install = plan.install
        if freeze is not None:
            install = Install.model_validate(
                {**plan.install.model_dump(), "packages": freeze}
            )
        steps.append(PythonEnvStep(plan.python, install, exact=freeze is not None,
                                   verify_all=verify_all))
    if plan.files:
        files: list[DesiredFile] = render_files(
            plan.files, base_dir=base_dir, render=lambda t: render_text(t, plan, secrets)
        )
        steps.append(FilesStep(files))
    else:
        files = []
    if plan.service is not None and with_service:
        # Imported here: a plan without a service does not pay for them (start-up time).
        from orchestrator.service.launch import render_launch
        from orchestrator.service.step import OrchWheelStep, ServiceStep

        if plan.python is None:
            raise PlanError("service: needs a `python:` section (the venv that runs the server)",
                            field="python")
        if plan.service.engine == "sim":
            steps.append(OrchWheelStep(plan.python))
        spec = render_launch(plan, venv_bin=f"{plan.python.venv}/bin")
        steps.append(ServiceStep(plan, spec, secrets, force_restart=force_restart,
                                 file_digests={f.path: f.sha256 for f in files}))
    return steps


def resolved_plan_yaml(loaded: LoadedPlan) -> str:
    """The plan as it was applied: layers merged, vars filled, templates inlined, secrets as
    references. Reloading it gives the same plan (used by --locked)."""
    data: dict[str, Any] = loaded.plan.model_dump(mode="json", exclude_none=True)
    data.pop("extends", None)
    for spec in data.get("files", []):
        if "template" in spec:
            template = (loaded.base_dir / spec.pop("template")).expanduser()
            spec["content"] = render_vars(template.read_text(), loaded.plan.vars)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


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
    return plan_file, Locked(folder=folder, freeze=freeze)


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


def execute(options: ApplyOptions) -> int:
    console = Console(highlight=False, stderr=options.json_lines)  # --json: stdout is events only
    locked: Locked | None = None
    plan_path = options.plan
    if options.locked is not None:
        plan_path, locked = load_locked(options.locked)
    assert plan_path is not None
    loaded = load_plan(plan_path, options.overlays, options.sets)
    plan = loaded.plan
    if options.show_origin:
        _print_origins(console, loaded)
    secrets = resolve_secrets(plan)  # before any connection: a missing one fails now
    inventory = load_inventory(options.inventory)
    if locked is not None:
        hosts = locked_hosts(locked, inventory, options.limit)
    else:
        hosts = inventory.select(plan.hosts, options.limit or None)

    # Every host's steps first: a plan error here (e.g. a flag with its own field) stops
    # the run before a run folder exists.
    with_service = "service" not in options.skip
    try:
        host_steps = {
            host: build_steps(
                plan, loaded.base_dir, secrets, with_service=with_service,
                force_restart=options.restart, verify_all=options.verify_all,
                freeze=locked.freeze[host] if locked else None,
            )
            for host in hosts
        }
    except PlanError as error:
        raise locate(error, loaded) from None

    folder: RunFolder | None = None
    if not options.check:
        folder = RunFolder.create(
            plan.name, loaded.digest, root=options.runs_dir, hosts=hosts,
            command="restart" if options.restart else "apply --locked" if locked else "apply",
            plan_file=str(plan_path), layers=loaded.layers,
            engine=plan.service.engine if plan.service else None,
            simulated=bool(plan.service and plan.service.engine == "sim"),
            locked_from=str(locked.folder) if locked else None,
        )
    try:
        failed, pending = _run(options, console, plan, loaded, secrets, inventory, host_steps, folder)
    except KeyboardInterrupt:
        if folder:
            folder.finish("incomplete")
            console.print(f"interrupted; run folder marked incomplete: {folder.path}", soft_wrap=True)
        raise
    except BaseException:
        if folder:  # whatever went wrong, the folder says the run did not complete
            folder.finish("failed")
        raise
    if failed:
        return 1
    return 2 if pending else 0


def _run(
    options: ApplyOptions,
    console: Console,
    plan: Plan,
    loaded: LoadedPlan,
    secrets: dict[str, str],
    inventory: Inventory,
    host_steps: dict[str, list[Step]],
    folder: RunFolder | None,
) -> tuple[bool, bool]:
    """Converge every host and report; (failed, pending)."""
    if folder:
        folder.write_plan(resolved_plan_yaml(loaded))
    reporter = Reporter(console, json_lines=options.json_lines)

    def emit(kind: str, **fields: Any) -> None:
        record = folder.event(kind, **fields) if folder else {"event": kind, **fields}
        record.setdefault("event", kind)
        reporter(record)

    jobs = []
    for host, steps in host_steps.items():
        after: list[Phase] = []
        if plan.service is not None or plan.collect:
            from orchestrator.lifecycle import Lifecycle
            from orchestrator.service.step import ServiceStep

            service_step = next((s for s in steps if isinstance(s, ServiceStep)), None)
            after.append(Lifecycle(plan=plan, secrets=secrets, inventory=inventory, folder=folder,
                                   console=console, service_step=service_step,
                                   skip=options.skip, base_dir=loaded.base_dir))
        jobs.append(HostJob(host, steps, after=after))
    if not options.json_lines:
        mode = "plan (check mode)" if options.check else "apply"
        console.print(f"[bold]{mode}[/] {plan.name} on {', '.join(host_steps)}")
        if folder:
            console.print(f"run folder: {folder.path}", soft_wrap=True)
    outcomes = run_hosts(jobs, inventory, check=options.check, emit=emit)
    if folder:
        _write_host_artifacts(folder, outcomes)
    if options.check and not options.json_lines:
        _print_diffs(console, outcomes)
    if not options.json_lines:
        console.print(recap_table(outcomes, title="plan" if options.check else "recap"))
    failed = any(o.failed for o in outcomes)
    pending = any(s.status == "pending" for o in outcomes for s in o.steps)
    if folder:
        folder.finish("failed" if failed else "complete")
        if not options.json_lines:
            console.print(f"run folder: {folder.path}", soft_wrap=True)
    return failed, pending


def _write_host_artifacts(folder: RunFolder, outcomes: list[HostOutcome]) -> None:
    for outcome in outcomes:
        folder.write_steps(HostSteps.model_validate({
            "host": outcome.host, "error": outcome.error, "round_trips": outcome.round_trips,
            "seconds": round(outcome.seconds, 3), "steps": [s.to_json() for s in outcome.steps],
            **outcome.extra,
        }))
        facts = outcome.facts
        if facts is None:
            continue
        folder.write_facts(outcome.host, HostFactsRecord(
            host=facts.host, probe_seconds=facts.probe_seconds, record_files=facts.record_stats))
        if facts.venv is not None and facts.venv.exists:
            folder.write_freeze(outcome.host, facts.venv.freeze())


def _print_diffs(console: Console, outcomes: list[HostOutcome]) -> None:
    for outcome in outcomes:
        for step in outcome.steps:
            for diff in step.diffs:
                console.print(f"[bold]{outcome.host}[/] {step.step}:")
                console.print(diff, markup=False, highlight=False, soft_wrap=True)


def _print_origins(console: Console, loaded: LoadedPlan) -> None:
    from rich.table import Table

    table = Table(title=f"origins of {loaded.plan.name}", title_justify="left")
    table.add_column("field")
    table.add_column("set by")
    for key, origin in sorted(loaded.origins.items()):
        table.add_row(key, origin)
    console.print(table)
