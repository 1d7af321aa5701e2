"""The hosts of a run in parallel, each in its own thread (at most `--forks` at once:
apply/forks.py): connect, converge, the stages after it; every host ends with an outcome,
whatever happens to the others."""

from __future__ import annotations

import time
from collections.abc import Callable

from orchestrator.apply.converge import HostJob, converge_host
from orchestrator.apply.forks import DEFAULT_FORKS, run_bounded
from orchestrator.errors import OrchError
from orchestrator.events import Emit, HostEnd, HostStart, Retry
from orchestrator.inventory import Inventory
from orchestrator.runs.outcome import HostOutcome
from orchestrator.transport.base import Transport
from orchestrator.transport.connect import connect as default_connect


def run_hosts(
    jobs: list[HostJob],
    inventory: Inventory,
    *,
    check: bool,
    emit: Emit,
    forks: int | None = DEFAULT_FORKS,
    connect: Callable[..., Transport] | None = None,
) -> list[HostOutcome]:
    """Converge every host, at most `forks` at once (None: all at once, as the nodes of a
    multi-node server must) in the jobs' order; every host ends with an outcome."""
    if connect is None:
        connect = default_connect
    return run_bounded(
        jobs, HostRun(inventory, check, emit, connect), forks=forks,
        # a bug, not a host failure: the host keeps an outcome, the others go on
        on_error=lambda job, error: HostOutcome(host=job.host, error=f"internal error: {error!r}"),
        label=lambda job: f"host-{job.host}")


class HostRun:
    """One host's run: connect (retrying what is transient), converge, close; the outcome
    says how it ended whatever happened."""

    def __init__(self, inventory: Inventory, check: bool, emit: Emit,
                 connect: Callable[..., Transport]) -> None:
        self.inventory, self.check, self.emit, self.connect = inventory, check, emit, connect

    def __call__(self, job: HostJob) -> HostOutcome:
        started = time.monotonic()
        self.emit(HostStart(job.host))
        transport: Transport | None = None
        outcome: HostOutcome | None = None
        try:
            transport = self.connect(
                job.host, self.inventory,
                on_retry=lambda host, attempt, error: self.emit(
                    Retry(host, attempt=attempt, error=str(error))),
            )
            outcome = converge_host(transport, job, check=self.check, emit=self.emit)
        except OrchError as error:
            outcome = HostOutcome(host=job.host, error=str(error))
        finally:
            if job.on_end is not None:
                job.on_end(outcome or HostOutcome(host=job.host, error="its run was interrupted"))
            round_trips = transport.round_trips if transport is not None else 0
            if transport is not None:
                transport.close()
        outcome.round_trips = round_trips
        if transport is not None and transport.choice is not None:
            outcome.transport = transport.choice.to_json()
        outcome.seconds = time.monotonic() - started
        failed_step = outcome.failed_step
        self.emit(HostEnd(job.host, failed=outcome.failed, error=outcome.error,
                          step=failed_step.step if failed_step is not None else None,
                          changed=outcome.changed, round_trips=outcome.round_trips,
                          seconds=round(outcome.seconds, 3)))
        return outcome
