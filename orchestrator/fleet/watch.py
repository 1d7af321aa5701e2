"""Repair after faults, called by the apply between levels (or whenever it likes):
`FleetWatch.reconcile(members)` registers again every serving replica the router does not
list, and says whether the router came back since the last look.

What the router does on its own (vllm-router 0.1.17, docs/fleet.md): a worker that dies
stays listed; requests not yet answered are retried on the others; after a few failures its
circuit breaker opens and it gets nothing until the breaker's timeout (60 s by default)
has passed, even once it serves again. What it does not do: take a worker back before
that, remember workers across its own restart (only `--worker-urls` come back), or re-add
a worker a roll left out when interrupted. `reconcile` repairs the three: a serving worker
with an open circuit is registered again (remove, add: a fresh breaker), a missing one added.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orchestrator.errors import OrchError
from orchestrator.events import Emit
from orchestrator.fleet.events import FleetRepair
from orchestrator.fleet.member import Member
from orchestrator.fleet.registration import answers
from orchestrator.router_client import RouterClient, RouterCounters

Serving = Callable[[Member], bool]


@dataclass
class Reconciled:
    """What one `reconcile` found and did."""

    registered: list[str] = field(default_factory=list)  # added back now
    reset: list[str] = field(default_factory=list)  # its open circuit replaced (remove, add)
    present: list[str] = field(default_factory=list)  # listed by the router, and serving
    listed_down: list[str] = field(default_factory=list)  # listed, not serving (the router
    # routes around it and takes it back once it answers: its supervision relaunches it)
    not_serving: list[str] = field(default_factory=list)  # missing and not up: left out
    refused: dict[str, str] = field(default_factory=dict)  # the router said no: its words
    router_back: bool = False  # the router restarted since the last look
    router_down: str | None = None  # it did not answer: nothing else was done

    @property
    def complete(self) -> bool:
        """Every member serves, registered with a router that answers."""
        return self.router_down is None and not (
            self.not_serving or self.refused or self.listed_down)


def answers_health(member: Member) -> bool:
    """The replica's /health answers 200 now (no waiting)."""
    return answers(member.url)


class FleetWatch:
    """Reconciles one router with the fleet's members, and counts the repairs over an apply:
    re-registrations per replica, router restarts seen."""

    def __init__(self, router: RouterClient, *, serving: Serving = answers_health,
                 emit: Emit | None = None) -> None:
        self.router = router
        self.serving = serving
        self.emit = emit
        self.re_registered: Counter[str] = Counter()
        self.router_restarts = 0
        self._requests_seen: float | None = None
        self._was_down = False

    def reconcile(self, members: Sequence[Member]) -> Reconciled:
        try:
            listed = set(self.router.workers())
        except OrchError as error:
            self._was_down = True
            return Reconciled(router_down=str(error))
        counters = self._counters()
        done = Reconciled(router_back=self._router_back(counters))
        if done.router_back:
            self.router_restarts += 1
            self._say("router", "ok", "the router came back: registering the replicas")
        circuit = counters.circuit if counters is not None else {}
        healthy = counters.healthy if counters is not None else {}
        for member in members:  # an open circuit, or the router's health check not yet
            # passed again: registered afresh, so it routes to the replica at once
            shut = circuit.get(member.url, 0.0) != 0.0 or healthy.get(member.url, 1.0) == 0.0
            self._one(member, listed, shut, done)
        return done

    def _one(self, member: Member, listed: set[str], open_circuit: bool,
             done: Reconciled) -> None:
        serving = self.serving(member)
        if member.url in listed and not serving:
            done.listed_down.append(member.id)
        elif member.url in listed and not open_circuit:
            done.present.append(member.id)
        elif not serving:
            done.not_serving.append(member.id)
        elif self._register(member, done, again=member.url in listed):
            (done.reset if member.url in listed else done.registered).append(member.id)

    def _register(self, member: Member, done: Reconciled, *, again: bool) -> bool:
        try:
            if again:
                self.router.remove(member.url)
            added, said = self.router.add(member.url)
        except OrchError as error:
            added, said = False, str(error)
        if not added:
            done.refused[member.id] = said
            self._say(member.id, "failed", f"the router refused it: {said}")
            return False
        self.re_registered[member.id] += 1
        self._say(member.id, "changed", "registered again (its circuit was open)" if again
                  else "registered with the router again")
        return True

    def _counters(self) -> RouterCounters | None:
        if self.router.metrics_url is None:
            return None
        try:
            return self.router.counters()
        except OrchError:
            return None

    def _router_back(self, counters: RouterCounters | None) -> bool:
        """Its counters went down (a new process) or it answers again after not answering."""
        back, self._was_down = self._was_down, False
        if counters is not None:
            seen, self._requests_seen = self._requests_seen, counters.requests
            back = back or (seen is not None and counters.requests < seen)
        return back

    def _say(self, who: str, status: str, message: str) -> None:
        if self.emit is not None:
            self.emit(FleetRepair(who, stage="fleet", status=status, message=message,
                                  replica=who))


def reconcile(router: RouterClient, members: Sequence[Member], *,
              serving: Serving = answers_health, emit: Emit | None = None) -> Reconciled:
    """One look, without counts kept across calls (FleetWatch keeps them)."""
    return FleetWatch(router, serving=serving, emit=emit).reconcile(members)
