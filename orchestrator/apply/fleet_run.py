"""One apply of a fleet as a value: its replicas' jobs as the apply builds them, the router's
run, and what a rolling redeploy needs of them:

- `converge_replica(id)`: converge and launch ONE replica as the apply does (its steps, its
  locks waited for, ready and smoke; no sweep), its outcome;
- `urls()`: each replica's base URL as the router reaches it (what `add_worker` was given);
- `router_client()`: a client of the running router (its API and metrics, reached from
  here: directly, or through SSH forwards).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from orchestrator.apply.converge import HostJob
from orchestrator.apply.fleet import EndHook, Fleet, chain_end, run_fleet
from orchestrator.apply.fleet_router import RouterRun, router_urls
from orchestrator.apply.hosts import HostRun
from orchestrator.events import Emit
from orchestrator.fleet.router_service import router_plan
from orchestrator.router_client import RouterClient
from orchestrator.runs.outcome import HostOutcome
from orchestrator.transport.connect import connect


@dataclass
class FleetRun:
    fleet: Fleet
    job: Callable[[str], HostJob]  # a replica's job, made afresh: its steps, locks, stages
    router: RouterRun
    emit: Emit
    forks: int | None

    def run(self) -> list[HostOutcome]:
        """Every replica, then the router (apply/fleet.py); the outcomes, the router's last."""
        return run_fleet(self.fleet, self.converge_replica, self.router, forks=self.forks)

    def converge_replica(self, replica_id: str,
                         on_end: EndHook | None = None) -> HostOutcome:
        """Converge and launch one replica, wait until it is ready (and its smoke checks
        pass); its outcome says whether it serves (`not outcome.failed`). `on_end` is told
        the outcome as the run ends (the apply's gate of the router)."""
        job = self.job(replica_id)
        if on_end is not None:
            chain_end(job, on_end)
        return HostRun(self.fleet.inventory, self.router.check, self.emit, connect)(job)

    def urls(self) -> dict[str, str]:
        """Each replica's base URL as the router reaches it, by replica id."""
        return {r.id: self.fleet.url(r) for r in self.fleet.replicas}

    @contextlib.contextmanager
    def router_client(self) -> Iterator[RouterClient]:
        """A client of the running router, for as long as the block lasts."""
        name = self.fleet.router.name
        plan = router_plan(self.fleet.plan, self.router.venv(), name)
        with connect(name, self.fleet.inventory) as transport, \
                router_urls(transport, self.fleet, plan) as (url, metrics_url), \
                RouterClient(url, metrics_url) as client:
            yield client
