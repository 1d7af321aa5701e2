"""The router's workers made equal to the ready replicas: each ready one added (the router
waits for its health), any other it lists removed (a replica that failed, one of an earlier
apply that is gone), then its list compared with the ready set: the fleet is ready when its
/health answers and its workers are exactly the ready replicas."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orchestrator.errors import OrchError
from orchestrator.router_client import RouterClient


class RegistrationFailed(OrchError):
    """The router refused a worker, or lists other workers than the ready replicas."""


@dataclass
class Registration:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already registered (a re-apply)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)

    def said(self) -> str:
        parts = [f"{len(self.added)} added" if self.added else "",
                 f"{len(self.removed)} removed" if self.removed else "",
                 f"{len(self.kept)} already registered" if self.kept else ""]
        return ", ".join(p for p in parts if p) or "no workers"


# The replica answered its readiness check moments ago: the router's own health check of it
# takes a second, not the 600 s its add_worker would wait for a worker that died meanwhile.
ADD_TIMEOUT_S = 60.0


def add_ready(client: RouterClient, url: str, done: Registration, listed: Iterable[str]) -> None:
    """Register one ready replica, unless the router lists it already."""
    if url in listed:
        done.kept.append(url)
        return
    if not answers(url):
        raise RegistrationFailed(f"{url} was ready but no longer answers /health: not "
                                 "registered", hint="its service log in the run folder says "
                                 "why it stopped; orch apply again relaunches it")
    ok, said = client.add(url, timeout=ADD_TIMEOUT_S)
    if not ok:
        raise RegistrationFailed(f"the router refused worker {url}: {said.strip()}",
                                 hint="the replica answered its own readiness check; see the "
                                      "router's log in the run folder")
    done.added.append(url)


def answers(url: str) -> bool:
    """The replica at `url` answers /health with 200 now (no waiting)."""
    import httpx  # start-up time: only once a fleet registers

    try:
        return httpx.get(f"{url}/health", timeout=5, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def settle(client: RouterClient, ready: list[str], done: Registration) -> list[str]:
    """Remove what the router lists beyond `ready`, then require its list to equal it."""
    for url in client.workers():
        if url not in ready:
            ok, said = client.remove(url)
            if not ok:
                raise RegistrationFailed(f"the router kept worker {url}: {said.strip()}")
            done.removed.append(url)
    listed = client.workers()
    if sorted(listed) != sorted(ready):
        raise RegistrationFailed(
            f"the router lists {', '.join(sorted(listed)) or 'no worker'}, not the ready "
            f"replicas {', '.join(sorted(ready)) or '(none)'}")
    return listed
