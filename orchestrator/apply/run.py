"""One `orch plan` / `orch apply`: load and compile the plan (secrets resolved first), open
the run folder, run every host, write its records, print the recap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.apply.compile import Compiled, Options, compile_plan, resolved_plan_yaml
from orchestrator.apply.converge import HostJob, LockRequest, Stage
from orchestrator.apply.environment import EnvironmentCapture
from orchestrator.apply.forks import DEFAULT_FORKS
from orchestrator.apply.hosts import run_hosts
from orchestrator.apply.records import failures, write_host_records
from orchestrator.console import make_console
from orchestrator.errors import UsageError
from orchestrator.events import Event
from orchestrator.exit_codes import ExitCode
from orchestrator.holder import Holder
from orchestrator.inventory import Inventory, load_inventory
from orchestrator.inventory.limit import narrow
from orchestrator.masking import mask
from orchestrator.output import Reporter, print_diffs, print_origins, recap_table
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.plan.models import Plan
from orchestrator.plan.secrets import resolve_secrets
from orchestrator.runs.layout import refuse_inside_run
from orchestrator.runs.outcome import HostOutcome
from orchestrator.runs.writer import RunFolder
from orchestrator.service.lock import lock_paths

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.apply.fleet import Fleet
    from orchestrator.apply.fleet_router import BenchThrough
    from orchestrator.apply.fleet_run import FleetRun
    from orchestrator.apply.locked import Locked
    from orchestrator.cluster.gate import Gate
    from orchestrator.fleet.gate import ReplicaGate

# A fleet (router:), a multi-node server, --locked and --resume are imported where they are
# used: a plain plan's no-op re-apply, whose time is mostly the interpreter's, never loads
# them.

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
    wait: bool = False  # wait for another apply's lock instead of failing at once
    break_lock: bool = False  # take over whatever holds the lock
    resume: str | None = None  # a run folder to continue, or "latest" (unfinished) of the plan
    on_folder: Callable[[Path], None] | None = None  # told the run folder once it exists (matrix)
    forks: int = DEFAULT_FORKS  # at most this many hosts at once (a multi-node server: all)

    def __post_init__(self) -> None:
        if self.forks < 1:
            raise UsageError(f"--forks must be at least 1, got {self.forks}",
                             hint=f"--forks N works on at most N hosts at once (default "
                                  f"{DEFAULT_FORKS})")


def execute(options: ApplyOptions, loaded: LoadedPlan | None = None) -> int:
    """The apply (or plan) of `options`; `loaded` is its plan when the caller has loaded it
    already (from the same file, overlays and sets), so that no apply loads its plan twice."""
    if not options.check:  # `orch plan` writes no run folder: any --runs-dir will do
        refuse_inside_run(options.runs_dir, "--runs-dir")  # a new run never lands in one
    console = make_console(stderr=options.json_lines)  # --json: stdout is events only
    locked: Locked | None = None
    plan_path = options.plan
    if options.locked is not None:
        from orchestrator.apply.locked import check_plan, load_locked

        plan_path, locked = load_locked(options.locked)
    assert plan_path is not None
    if loaded is None:
        loaded = load_plan(plan_path, options.overlays, options.sets)
    # before any connection: a missing one fails now, named with where it is used
    secrets = resolve_secrets(loaded.plan, origins=loaded.field_origins)
    inventory = load_inventory(options.inventory)
    if locked is not None:
        note = check_plan(locked, loaded.plan, plan_path, inventory)
        if note:
            console.print(note, soft_wrap=True, markup=False)
    hosts = _hosts(options, loaded.plan, inventory, locked)
    fleet, inventory, hosts = _as_fleet(loaded.plan, hosts, inventory)
    # Every host's steps first: a plan error here (e.g. a flag with its own field) stops
    # the run before a run folder exists.
    compiled = compile_plan(loaded, secrets, hosts, Options(
        with_service="service" not in options.skip, force_restart=options.restart,
        verify_all=options.verify_all, freeze=locked.freeze if locked else None,
        commits=locked.commits if locked else None,
        replicas=fleet.by_id if fleet is not None else None,
    ), inventory)
    if options.show_origin:
        print_origins(console, loaded, inventory, hosts)
    folder = _open_folder(options, console, loaded, plan_path,
                          [*hosts, fleet.router.name] if fleet is not None else hosts, locked)
    try:
        outcomes = _run(options, console, loaded, secrets, inventory, compiled, folder, fleet)
    except KeyboardInterrupt as stopped:
        _interrupted(options, console, loaded.plan, plan_path, folder)
        raise stopped
    except BaseException:
        if folder:  # whatever went wrong, the folder says the run did not complete
            folder.finish("failed", best_effort=True)
        raise
    finally:
        if folder:
            folder.close()
    return _exit_code(options, fleet, outcomes)


def _exit_code(options: ApplyOptions, fleet: Fleet | None, outcomes: list[HostOutcome]) -> int:
    plain = exit_code(outcomes)
    if fleet is None or not _serves(options):
        return plain
    from orchestrator.apply.fleet import fleet_exit_code, fleet_record

    return fleet_exit_code(fleet, fleet_record(fleet, outcomes), outcomes, plain)


def _serves(options: ApplyOptions) -> bool:
    """Whether a fleet's apply brings it up (not `orch plan`, not `--skip service`)."""
    return not options.check and "service" not in options.skip


def _as_fleet(plan: Plan, hosts: list[str],
              inventory: Inventory) -> tuple[Fleet | None, Inventory, list[str]]:
    """A plan with `router:` runs each replica as a host of the run (apply/fleet.py)."""
    if plan.router is None:
        return None, inventory, hosts
    from orchestrator.apply.fleet import Fleet

    fleet = Fleet.of(plan, hosts, inventory)
    return fleet, fleet.inventory, fleet.ids


def _hosts(options: ApplyOptions, plan: Plan, inventory: Inventory,
           locked: Locked | None) -> list[str]:
    """The hosts of this apply: the plan's (or a locked run's) narrowed by --limit; a
    multi-node server is started whole."""
    if locked is not None and plan.router is not None:
        raise UsageError("--locked does not redeploy a fleet (a plan with router:) yet",
                         hint="apply the plan itself: its pins are exact")
    if locked is not None:
        from orchestrator.apply.locked import locked_hosts

        hosts = locked_hosts(locked, inventory, options.limit)
    else:
        hosts = narrow(inventory, inventory.select(plan.hosts), options.limit)
    if plan.service is not None and plan.service.nodes is not None and options.limit \
            and "service" not in options.skip:
        every = inventory.select(plan.hosts)
        if set(hosts) != set(every):
            raise UsageError(
                f"--limit picks {', '.join(hosts)} of the server's nodes ({', '.join(every)}): "
                "a multi-node server starts whole",
                hint="apply without --limit, or with --skip service to converge some nodes only")
    return hosts


def _open_folder(options: ApplyOptions, console: Console, loaded: LoadedPlan, plan_path: Path,
                 hosts: list[str], locked: Locked | None) -> RunFolder | None:
    """The run folder: none in check mode, the resumed one, or a new one; locked for this
    apply before a byte of it is written (a resumed one only once it may be resumed)."""
    plan = loaded.plan
    folder: RunFolder | None = None
    holder = Holder.me(None, _command_name(options))
    if not options.check and options.resume is not None:
        from orchestrator.apply.locked import check_resume, resumable

        which = options.resume
        folder = RunFolder.claim(resumable(which, plan.name, options.runs_dir), holder)
        try:
            check_resume(which, folder.path, folder.meta, loaded,
                         mask(resolved_plan_yaml(loaded)))  # as plan.yaml was written
        except BaseException:
            folder.close()
            raise
        folder.resume()
        console.print(f"resuming the run in {folder.path}", soft_wrap=True)
    elif not options.check:
        folder = RunFolder.create(
            plan.name, loaded.digest, root=options.runs_dir, hosts=hosts, holder=holder,
            command=_command_name(options),
            plan_file=str(plan_path), layers=loaded.layers,
            engine=plan.service.engine if plan.service else None,
            simulated=_simulated(plan),
            locked_from=str(locked.folder) if locked else None,
        )
    if folder is not None and options.on_folder is not None:
        options.on_folder(folder.path)
    return folder


def _simulated(plan: Plan) -> bool:
    if plan.service is None:
        return False
    from orchestrator.engines import engine  # a plan with a service: not a no-op's cost

    return engine(plan.service.engine).simulated


def _interrupted(options: ApplyOptions, console: Console, plan: Plan, plan_path: Path,
                 folder: RunFolder | None) -> None:
    if folder:
        folder.finish("interrupted", best_effort=True)
        console.print(f"interrupted; run folder marked interrupted: {folder.path}", soft_wrap=True)
    if plan.service is not None and not options.check:
        inventory_arg = f" -i {options.inventory}" if options.inventory else ""
        console.print(f"the service {plan.service.name} keeps running where it was started; "
                      f"stop it with: orch stop {plan_path}{inventory_arg}", soft_wrap=True)


def exit_code(outcomes: list[HostOutcome]) -> ExitCode:
    """Failed hosts win over pending changes; only busy locks: try again later."""
    failed = [o for o in outcomes if o.failed]
    if failed:
        locked = all(o.exit_code == ExitCode.LOCKED for o in failed)
        return ExitCode.LOCKED if locked else ExitCode.ERROR
    pending = any(s.status == "pending" for o in outcomes for s in o.steps)
    return ExitCode.CHANGES if pending else ExitCode.OK


def _run(
    options: ApplyOptions,
    console: Console,
    loaded: LoadedPlan,
    secrets: dict[str, str],
    inventory: Inventory,
    compiled: Compiled,
    folder: RunFolder | None,
    fleet: Fleet | None = None,
) -> list[HostOutcome]:
    """Converge every host (a fleet: every replica, then its router) and report."""
    plan = loaded.plan
    if folder and not (options.resume and folder.layout.plan.is_file()):  # resumed: as it ran
        folder.write_plan(resolved_plan_yaml(loaded))
    reporter = Reporter(console, json_lines=options.json_lines)

    def emit(event: Event) -> None:
        reporter(event, folder.event(event) if folder and event.kept else None)

    holder = folder.holder if folder else Holder.me(None, _command_name(options))
    jobs = [_job(options, console, loaded, secrets, inventory, compiled, folder, host, holder,
                 fleet) for host in compiled.steps]
    if not options.json_lines:
        mode = "plan (check mode)" if options.check else "apply"
        front = f", behind the router {fleet.router.name}" if fleet is not None else ""
        console.print(f"[bold]{mode}[/] {plan.name} on {', '.join(compiled.steps)}{front}")
        if plan.service is not None and plan.bench is None and "bench" not in options.skip:
            console.print("no benchmark: bench is null")  # a server alone is a choice; say it
        if folder:
            console.print(f"run folder: {folder.path}", soft_wrap=True)
    # The nodes of a multi-node server vote and wait for each other: all of them at once.
    forks = None if compiled.gate is not None else options.forks
    if forks is None and len(jobs) > options.forks and not options.json_lines:
        console.print(f"the {len(jobs)} nodes of the server run at once (--forks "
                      f"{options.forks} does not bound a multi-node server's nodes)")
    with reporter.live():
        if fleet is not None:
            outcomes = _fleet_outcomes(options, loaded, secrets, compiled, folder, console,
                                       fleet, emit, holder, jobs)
        else:
            outcomes = run_hosts(jobs, inventory, check=options.check, emit=emit, forks=forks)
    _report(options, console, folder, outcomes, fleet)
    return outcomes


def _report(options: ApplyOptions, console: Console, folder: RunFolder | None,
            outcomes: list[HostOutcome], fleet: Fleet | None) -> None:
    """The run's records, diffs (plan) and recap; a fleet's fleet.json and its state."""
    if folder:
        write_host_records(folder, outcomes)
    if options.check and not options.json_lines:
        print_diffs(console, outcomes)
    if not options.json_lines:
        console.print(recap_table(outcomes, title="plan" if options.check else "recap"))
    failed = any(o.failed for o in outcomes)
    if fleet is not None and _serves(options):
        from orchestrator.apply.fleet import fleet_record, recap_lines, run_failed

        record = fleet_record(fleet, outcomes)
        failed = run_failed(fleet, record, outcomes)  # degraded serves: its failures listed
        if folder:
            folder.write_fleet(record)
        for line in recap_lines(record) if not options.json_lines else []:
            console.print(line, markup=False, soft_wrap=True,
                          style=None if record.state == "ready" else "yellow")
    if folder:
        folder.meta.failures = failures(outcomes)
        folder.finish("failed" if failed else "complete")
        if not options.json_lines:
            console.print(f"run folder: {folder.path}", soft_wrap=True)


def _job(options: ApplyOptions, console: Console, loaded: LoadedPlan, secrets: dict[str, str],
         inventory: Inventory, compiled: Compiled, folder: RunFolder | None, host: str,
         holder: Holder, fleet: Fleet | None = None) -> HostJob:
    """One host's job: its steps, its locks, and the stages after converge in order. A
    fleet's replica: its own plan, no sweep (the router's run has it), and the venv lock
    of its host, waited for (the replicas of a host share its venv) and held through its
    converge only (the next replica converges while it starts)."""
    # What a plan without a server never needs (the load generator among it) is not imported
    # for it: a no-op re-apply's time is mostly the interpreter's.
    plan = loaded.plan
    if fleet is not None:
        plan = compiled.plans[host].model_copy(update={"bench": None})
    lock = None if options.check else LockRequest(
        lock_paths(plan.python.venv if plan.python else None, plan.name,
                   plan.service.name if plan.service else None,
                   fleet.inventory.real(host) if fleet is not None else host), holder,
        wait=options.wait or fleet is not None, break_lock=options.break_lock)
    after: list[Stage] = []
    environment = EnvironmentCapture(plan, folder)  # the run's nvidia-smi -q, collect-env
    if folder is not None:
        after.append(environment.start)
    gate = compiled.gate
    units = compiled.unit_steps(host)
    if gate is not None and gate.topology.node(host).role == "worker" and \
            "service" not in options.skip:
        # only a multi-node server's worker (start-up time)
        from orchestrator.cluster.watch import NodeWatch

        # It stays in the run until the head's ends, and answers for itself if that
        # failed: a worker cut off after its start is no `changed` in the recap.
        after.append(NodeWatch(gate, host, units))
    if plan.service is not None or plan.collect:
        # the stages: not for `orch plan`, nor a plan without them (start-up time)
        from orchestrator.apply.lifecycle import Lifecycle

        after.append(Lifecycle(plan=plan, secrets=secrets, inventory=inventory, folder=folder,
                               console=console, service_step=compiled.service_step(host),
                               skip=options.skip, base_dir=loaded.base_dir, units=units,
                               resume=options.resume is not None))
    if folder is not None:
        after.append(environment.finish)
    on_end = None
    if gate is not None:
        def on_end(outcome: HostOutcome, gate: Gate = gate) -> None:
            gate.withdraw(outcome.host, _why_ended(outcome), failed=outcome.failed)
    install = compiled.installs.get(host)
    if install is not None and folder is not None:  # the run the record names
        install = replace(install, run=f"{plan.name}/{folder.path.name}")
    return HostJob(host, compiled.steps[host], after=after, lock=lock, on_end=on_end,
                   install=install, release_before_stages=fleet is not None)


def _fleet_outcomes(options: ApplyOptions, loaded: LoadedPlan, secrets: dict[str, str],
                    compiled: Compiled, folder: RunFolder | None, console: Console,
                    fleet: Fleet, emit: Callable[[Event], None], holder: Holder,
                    jobs: list[HostJob]) -> list[HostOutcome]:
    """The fleet's run; a fleet that serves, applied a plan that changes what some replicas
    launch, rolls them first, one by one behind its router (apply/fleet_roll.py)."""
    from orchestrator.apply.fleet_roll import changed, previous, roll_fleet, serving

    run = _fleet_run(options, loaded, secrets, compiled, folder, console, fleet, emit, holder,
                     jobs)
    if not _serves(options) or options.restart or options.resume is not None \
            or fleet.router.mode == "pd" or not serving(run):
        return run.run()
    here = folder.path if folder else None
    before = previous(fleet, options.runs_dir, here, fleet.inventory)
    ids = changed(compiled, before.compiled, fleet.ids) if before is not None else []
    if before is None or not ids:
        return run.run()
    old = _fleet_run(options, before.loaded, before.secrets, before.compiled, folder, console,
                     fleet, emit, holder, [])
    return roll_fleet(fleet, run, old, ids, emit=emit, folder=here)


def _fleet_run(options: ApplyOptions, loaded: LoadedPlan, secrets: dict[str, str],
               compiled: Compiled, folder: RunFolder | None, console: Console, fleet: Fleet,
               emit: Callable[[Event], None], holder: Holder, jobs: list[HostJob]) -> FleetRun:
    """The fleet's run: the replicas' jobs, the router's run, whose sweep goes through it to
    the first replica that serves (fleet plans take no API key)."""
    from orchestrator.apply.fleet_repair import Repair
    from orchestrator.apply.fleet_router import RouterRun
    from orchestrator.apply.fleet_run import FleetRun

    plan = loaded.plan
    made = {job.host: job for job in jobs}

    def job(replica: str) -> HostJob:  # the apply's own first, then made afresh
        found = made.pop(replica, None)
        return found if found is not None else _job(
            options, console, loaded, secrets, fleet.inventory, compiled, folder, replica,
            holder, fleet)

    def bench(gate: ReplicaGate) -> BenchThrough | None:
        if plan.bench is None or not gate.ready:
            return None
        from orchestrator.apply.bench import BenchStage  # the load generator: not for a no-op

        first = gate.ready[0].id
        step = compiled.service_step(first)
        assert step is not None
        return BenchStage(compiled.plans[first], step, folder, console, None,
                          base_dir=loaded.base_dir, resume=options.resume is not None,
                          through_router=True)

    router = RouterRun(fleet, options.check, emit, holder, folder, skip=options.skip,
                       force_restart=options.restart, wait=options.wait,
                       break_lock=options.break_lock, bench=bench)
    run = FleetRun(fleet, job, router, emit, options.forks)
    router.repair = Repair(fleet, run.converge_replica)
    return run


def _why_ended(outcome: HostOutcome) -> str:
    failed = next((s for s in outcome.steps if s.status == "failed"), None)
    if outcome.error:
        return outcome.error
    if failed is not None:
        return f"its {failed.step} step failed: {failed.error or 'see above'}"
    return "its run ended"


def _command_name(options: ApplyOptions) -> str:
    return "restart" if options.restart else "apply --locked" if options.locked else "apply"
