"""A fleet's apply (a plan with `router:`): every replica of `replicas_of(plan, hosts)` runs
as a host of its own, in parallel (at most --forks at once): its job key and `hosts/<id>/`
in the run folder are the replica id, its connection its host's (fleet/inventory.py), its
plan `replica_plan(plan, replica)`. Replicas sharing a host share its venv: its lock
serializes them (they wait for it). The router's run (fleet_router.py) waits until
`min_ready` replicas serve, then converges and launches the router and registers every
replica that is or becomes ready; the sweep goes through it. The run folder's fleet.json says
what came up: ready, degraded (fewer than all, at least min_ready) or failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.apply.converge import HostJob
from orchestrator.apply.forks import run_bounded
from orchestrator.exit_codes import ExitCode
from orchestrator.fleet.gate import ReplicaGate
from orchestrator.fleet.inventory import FleetInventory, fleet_inventory, worker_address
from orchestrator.inventory import Inventory
from orchestrator.plan.models import Plan
from orchestrator.plan.models.fleet import Router
from orchestrator.plan.replicas import Replica, replicas_of
from orchestrator.runs.fleet_record import FleetRecord, ReplicaRecord, RouterRecord
from orchestrator.runs.outcome import HostOutcome


@dataclass(frozen=True)
class Fleet:
    """The replicas of a plan on its hosts, and the inventory that reaches them."""

    plan: Plan
    replicas: list[Replica]
    inventory: FleetInventory

    @classmethod
    def of(cls, plan: Plan, hosts: Sequence[str], inventory: Inventory) -> Fleet:
        assert plan.service is not None and plan.router is not None  # the plan's model says so
        replicas = replicas_of(plan, hosts)
        return cls(plan, replicas, fleet_inventory(inventory, replicas, plan.router))

    @property
    def router(self) -> Router:
        assert self.plan.router is not None
        return self.plan.router

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.replicas]

    @property
    def by_id(self) -> dict[str, Replica]:
        return {r.id: r for r in self.replicas}

    @property
    def min_ready(self) -> int:
        wanted = self.plan.replicas.min_ready if self.plan.replicas is not None else None
        return min(wanted or len(self.replicas), len(self.replicas))

    def url(self, replica: Replica) -> str:
        """The replica's base URL as the router reaches it."""
        return replica.url(worker_address(self.inventory, replica.host, self.router))


RouterRunner = Callable[[ReplicaGate], HostOutcome]
EndHook = Callable[[HostOutcome], None]
# A replica's converge and launch, by its id; told its outcome when its run ends.
ReplicaRunner = Callable[[str, EndHook], HostOutcome]


def run_fleet(fleet: Fleet, replica: ReplicaRunner, router: RouterRunner, *,
              forks: int | None) -> list[HostOutcome]:
    """Every replica's run and the router's, at most `forks` at once (the router's last: it
    waits for the replicas, never they for it); the outcomes in that order."""
    gate = ReplicaGate(fleet.replicas, fleet.min_ready)
    items: list[str | None] = [*fleet.ids, None]

    def work(item: str | None) -> HostOutcome:
        if item is None:
            return router(gate)
        return replica(item, lambda outcome: gate.ended(
            item, why_failed(outcome) if outcome.failed else None))

    def failed(item: str | None, error: BaseException) -> HostOutcome:
        return HostOutcome(host=item or fleet.router.name, error=f"internal error: {error!r}")

    return run_bounded(items, work, forks=forks, on_error=failed,
                       label=lambda item: f"host-{item or 'router'}")


def chain_end(job: HostJob, hook: EndHook) -> None:
    """`hook` told of the job's outcome when it ends, after what the job tells already."""
    earlier = job.on_end

    def on_end(outcome: HostOutcome) -> None:
        if earlier is not None:
            earlier(outcome)
        hook(outcome)

    job.on_end = on_end


def why_failed(outcome: HostOutcome) -> str:
    """Why a replica's or the router's run failed, short: its error's first line, and the
    cause a diagnosis found."""
    step = outcome.failed_step
    if outcome.error:
        return _short(outcome.error)
    if step is not None:
        return f"{step.step}: {_short(step.error or 'failed')}"
    return "its run ended"


def _short(error: str) -> str:
    lines = error.strip().splitlines()
    cause = next((line.strip() for line in lines[1:] if line.strip().startswith("cause:")), None)
    return f"{lines[0]} ({cause})" if cause else lines[0]


def fleet_record(fleet: Fleet, outcomes: Sequence[HostOutcome]) -> FleetRecord:
    """fleet.json from the run's outcomes (the router's is the last)."""
    by_host = {o.host: o for o in outcomes}
    replicas = []
    for replica in fleet.replicas:
        outcome = by_host.get(replica.id)
        failed = outcome is None or outcome.failed
        replicas.append(ReplicaRecord(
            id=replica.id, host=replica.host, url=fleet.url(replica), role=replica.role,
            state="failed" if failed else "ready",
            error=why_failed(outcome) if outcome is not None and failed else None))
    router_outcome = by_host.get(fleet.router.name)
    said = router_outcome.extra.get("router", {}) if router_outcome is not None else {}
    router = RouterRecord(
        host=fleet.router.name, version=fleet.router.version, policy=fleet.router.policy,
        mode=fleet.router.mode, url=said.get("url"), metrics_url=said.get("metrics_url"),
        workers=said.get("workers", []),
        error=why_failed(router_outcome) if router_outcome is not None and
        router_outcome.failed else None)
    ready = sum(1 for r in replicas if r.state == "ready")
    router_up = router_outcome is not None and (any(  # its workers registered: it serves
        s.step == "register" and s.status in ("ok", "changed") for s in router_outcome.steps)
        or (router_outcome.extra.get("roll") == "stopped" and bool(router.workers)))
    state = "failed" if not router_up or ready < fleet.min_ready else \
        "degraded" if ready < len(replicas) else "ready"
    return FleetRecord(state=state, min_ready=fleet.min_ready, replicas=replicas, router=router)


def run_failed(fleet: Fleet, record: FleetRecord, outcomes: Sequence[HostOutcome]) -> bool:
    """Whether the fleet's run failed: it does not serve, or the router's run failed (its
    sweep, say); a replica that failed in a fleet that serves does not fail the run."""
    router = next((o for o in outcomes if o.host == fleet.router.name), None)
    return record.state == "failed" or router is None or router.failed


def fleet_exit_code(fleet: Fleet, record: FleetRecord, outcomes: Sequence[HostOutcome],
                    plain: ExitCode) -> ExitCode:
    """A degraded fleet serves, but says so in its exit code; otherwise as any apply."""
    if not run_failed(fleet, record, outcomes) and record.state == "degraded":
        return ExitCode.DEGRADED
    return plain


def recap_lines(record: FleetRecord) -> list[str]:
    """What the recap says of the fleet, below the hosts' table."""
    ready = [r for r in record.replicas if r.state == "ready"]
    router = record.router
    lines = [f"fleet {record.state}: {len(ready)} of {len(record.replicas)} replicas serve "
             f"(min_ready {record.min_ready}); router {router.url or '-'} with "
             f"{len(router.workers)} worker(s) registered"]
    lines += [f"  {r.id}: not serving: {r.error}" for r in record.replicas if r.state != "ready"]
    if router.error:
        lines.append(f"  router: {router.error}")
    return lines
