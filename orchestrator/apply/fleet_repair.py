"""After the sweep through a fleet's router: the replicas that stopped serving during it (a
crash under load) are relaunched by their own run (converged, launched, ready, smoke), and
the router is reconciled with the fleet (fleet/watch.py): a replica it lost, or whose
circuit it opened while the replica was down, is registered again. The router's run keeps
it as its `repair` stage, said in words: which replica was relaunched, which registered again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.apply.fleet import Fleet, why_failed
from orchestrator.errors import OrchError
from orchestrator.events import Emit
from orchestrator.fleet.member import Member
from orchestrator.fleet.watch import FleetWatch, answers_health
from orchestrator.plan.replicas import Replica
from orchestrator.router_client import RouterClient
from orchestrator.runs.outcome import HostOutcome

Relaunch = Callable[[str], HostOutcome]  # a replica's run, by its id (FleetRun.converge_replica)


@dataclass
class Repair:
    fleet: Fleet
    relaunch: Relaunch

    def __call__(self, client: RouterClient, ready: Sequence[Replica],
                 emit: Emit) -> tuple[str, bool]:
        members = [Member(r, self.fleet.url(r)) for r in ready]
        down = [m for m in members if not answers_health(m)]
        failed: list[str] = []
        for member in down:
            outcome = self.relaunch(member.id)
            if outcome.failed:
                failed.append(f"{member.id} ({why_failed(outcome)})")
        done = FleetWatch(client, emit=emit).reconcile(members)
        if done.router_down is not None:
            raise OrchError(f"the router did not answer after the sweep: {done.router_down}")
        said = [f"{m.id} relaunched" for m in down if m.id not in failed]
        said += [f"{rid} registered again" for rid in [*done.registered, *done.reset]]
        if failed or done.not_serving or done.refused:
            lost = failed + done.not_serving + list(done.refused)
            raise OrchError(f"{', '.join(said) + '; ' if said else ''}not serving after the "
                            f"sweep: {', '.join(lost)}")
        changed = bool(said)
        return ("; ".join(said) if said else f"{len(members)} replica(s) serve, registered"), changed
