"""Wait for the router it started: alive (its pidfile's process, watched as a model server's
is) and its /health answers 200. It serves no model of its own, so no chat is asked of it
here; the fleet is ready once its workers are registered (registration.py)."""

from __future__ import annotations

import time

from orchestrator.errors import OrchError, StartupFailed, StartupTimeout
from orchestrator.events import Emit, StageEvent
from orchestrator.plan.models import Health
from orchestrator.router_client import RouterClient
from orchestrator.service.backends import watch_command
from orchestrator.service.readiness import parse_watch
from orchestrator.service.step import ServiceStep
from orchestrator.transport.base import Transport

_TAIL = 20  # log lines a failure shows


def wait_router(transport: Transport, step: ServiceStep, health: Health, url: str,
                emit: Emit) -> float:
    """Seconds until the router answered /health; a death or the deadline raise, with the
    end of its log."""
    started = time.monotonic()
    deadline = started + health.startup_timeout
    log, offset = "", 0
    with RouterClient(url, url) as client:
        while True:
            result = transport.run(watch_command(step.backend, step.paths, offset), check=False,
                                   timeout=60)
            state, chunk = parse_watch(result.stdout)
            offset += len(chunk)
            log += chunk.decode("utf-8", "replace")
            if state in ("dead", "stopped"):
                raise StartupFailed(f"{transport.host}: the router {state} during start-up"
                                    + _tail(log))
            if _healthy(client):
                took = time.monotonic() - started
                emit(StageEvent(transport.host, stage="startup", status="ok",
                                message=f"the router answers at {url}"))
                return took
            if time.monotonic() >= deadline:
                raise StartupTimeout(f"{transport.host}: the router's /health did not answer "
                                     f"within {health.startup_timeout:g} s (health."
                                     "startup_timeout)" + _tail(log))
            time.sleep(health.poll_interval)


def _healthy(client: RouterClient) -> bool:
    try:
        return client.health() == 200
    except OrchError:
        return False


def _tail(log: str) -> str:
    lines = log.strip().splitlines()[-_TAIL:]
    return ("\n  last log lines:\n" + "\n".join(f"    {line}" for line in lines)) if lines else ""
