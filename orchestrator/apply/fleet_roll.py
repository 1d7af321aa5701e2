"""Applying a changed plan to a fleet that serves: replica by replica behind its router, never
all at once (fleet/roll.py does the moves; this module gives them the apply's work).

    the router answers with workers registered, and the last run of the plan that brought
    the fleet up (its plan.yaml, its frozen sets) differs from this plan for some replicas
      -> roll those: out of the router, drained, converged and launched (ready, smoke: the
         replica's own run), back in; a failure: that replica converged back to the last
         run's plan and frozen set (as --locked would), back in, the roll stops
      -> every replica rolled: the apply goes on as any (a no-op converge, the router's run
         and its sweep); stopped: the run fails and says where, the fleet still serving

What a replica's run compares is what it launches (python, install, model, files, env,
service, health, commands); a change to bench, smoke or collect alone rolls nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.apply.compile import Compiled, Options, compile_plan
from orchestrator.apply.fleet import Fleet, why_failed
from orchestrator.apply.fleet_run import FleetRun
from orchestrator.apply.locked import load_locked
from orchestrator.errors import OrchError
from orchestrator.events import Emit
from orchestrator.fleet.member import Member
from orchestrator.fleet.roll import RollOptions, roll
from orchestrator.inventory import Inventory
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.plan.models import Plan
from orchestrator.plan.replicas import replicas_of
from orchestrator.plan.secrets import resolve_secrets
from orchestrator.runs.fleet_record import FleetRecord
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.outcome import HostOutcome
from orchestrator.runs.reader import plan_runs, read_meta, read_record
from orchestrator.server_client import ServerClient

# What a replica launches: a change here is a new version to roll.
LAUNCHED = {"python", "install", "model", "files", "env", "service", "health", "commands"}


@dataclass(frozen=True)
class Previous:
    """The last run that brought the fleet up: its folder, its plan compiled for this fleet's
    replicas with its frozen sets (what a failed replica goes back to)."""

    folder: Path
    loaded: LoadedPlan
    secrets: dict[str, str]
    compiled: Compiled


def last_serving_run(runs_dir: Path, plan_name: str, current: Path | None) -> Path | None:
    """The newest complete run of the plan whose fleet.json says it served."""
    for folder in reversed(plan_runs(runs_dir, plan_name)):
        fleet_file = RunLayout(folder).fleet
        if (current is not None and folder.resolve() == current.resolve()) \
                or not fleet_file.is_file() or read_meta(folder).status != "complete":
            continue
        try:
            record = read_record(fleet_file, FleetRecord)
        except OrchError:
            continue
        if record.state in ("ready", "degraded"):
            return folder
    return None


def previous(fleet: Fleet, runs_dir: Path, current: Path | None,
             inventory: Inventory) -> Previous | None:
    """The last serving run, compiled for this fleet with its frozen sets; None when there
    is none, or its replicas were other ones (a new shape of fleet is applied whole)."""
    found = last_serving_run(runs_dir, fleet.plan.name, current)
    if found is None:
        return None
    plan_path, locked = load_locked(found)
    loaded = load_plan(plan_path)
    hosts = list(dict.fromkeys(r.host for r in fleet.replicas))
    if loaded.plan.router is None or replicas_of(loaded.plan, hosts) != fleet.replicas:
        return None
    secrets = resolve_secrets(loaded.plan)
    compiled = compile_plan(loaded, secrets, fleet.ids, Options(
        freeze=locked.freeze, commits=locked.commits, replicas=fleet.by_id), inventory)
    return Previous(found, loaded, secrets, compiled)


def changed(now: Compiled, before: Compiled, ids: Sequence[str]) -> list[str]:
    """The replicas whose launched plan differs between the two runs."""
    return [rid for rid in ids
            if rid in before.plans and _launched(now.plans[rid]) != _launched(before.plans[rid])]


def _launched(plan: Plan) -> dict[str, Any]:
    return plan.model_dump(mode="json", include=LAUNCHED)


def serving(run: FleetRun) -> list[str]:
    """The workers the fleet's router has registered (empty: no router answers)."""
    try:
        with run.router_client() as client:
            return client.workers() if client.health() == 200 else []
    except (OrchError, OSError, ValueError):
        return []


@dataclass
class _Ops:
    """The apply's work on one replica, for the roll."""

    new: FleetRun
    old: FleetRun
    outcomes: dict[str, HostOutcome] = field(default_factory=dict)
    restored: dict[str, HostOutcome] = field(default_factory=dict)

    def version(self, member: Member) -> str | None:
        try:
            with ServerClient(member.url, timeout=5.0) as client:
                return str(client.version().get("version") or "") or None
        except OrchError:
            return None

    def update(self, member: Member) -> None:
        outcome = self.new.converge_replica(member.id)
        self.outcomes[member.id] = outcome
        if outcome.failed:
            raise OrchError(why_failed(outcome))

    def ready(self, member: Member) -> bool:
        return True  # the replica's run waited for it (update): failed runs raised there

    def smoke(self, member: Member) -> Sequence[str]:
        return []  # and ran its smoke checks

    def restore(self, member: Member) -> None:
        outcome = self.old.converge_replica(member.id)
        self.restored[member.id] = outcome
        if outcome.failed:
            raise OrchError(f"the previous version did not come back: {why_failed(outcome)}")


def roll_fleet(fleet: Fleet, new: FleetRun, old: FleetRun, ids: Sequence[str], *,
               emit: Emit, folder: Path | None) -> list[HostOutcome]:
    """Roll the replicas `ids` (fleet order), then the apply's own run when every one
    swapped; the outcomes, a stopped roll's carried by the router's line."""
    members = [Member(r, fleet.url(r)) for r in fleet.replicas if r.id in ids]
    ops = _Ops(new, old)
    spec = fleet.plan.replicas
    options = RollOptions(max_unavailable=spec.max_unavailable if spec is not None else 1)
    with new.router_client() as client:
        record = roll(members, client, ops, options=options, emit=emit, folder=folder)
        workers = client.workers()
    if record.outcome == "done":
        after = new.run()
        return [ops.outcomes[o.host] if o.host in ops.outcomes and not o.failed else o
                for o in after]
    return _stopped(fleet, ops, record.stopped_by, workers)


def _stopped(fleet: Fleet, ops: _Ops, by: str | None, workers: list[str]) -> list[HostOutcome]:
    """A roll that stopped: each replica as it ended (restored, rolled, untouched), and the
    router's line saying where and why, with the workers it still routes to."""
    out = []
    for replica in fleet.replicas:
        rid = replica.id
        if rid in ops.restored:
            out.append(ops.restored[rid])
        elif rid in ops.outcomes:
            out.append(ops.outcomes[rid])
        else:
            out.append(HostOutcome(host=rid))  # untouched: the previous version serves
    failed = ops.outcomes.get(by or "")
    why = why_failed(failed) if failed is not None else "its swap failed"
    error = (f"the roll stopped at {by}: its new version failed ({why}); it runs the previous "
             f"run's version again, the replicas after it were not touched (roll.json)")
    out.append(HostOutcome(host=fleet.router.name, error=error, extra={
        "router": {"workers": workers}, "roll": "stopped"}))
    return out

