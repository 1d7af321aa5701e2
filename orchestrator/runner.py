"""The runner: phases per host, hosts in parallel, events for every step.

    connect -> probe (one round trip) -> plan every step (pure) -> [apply -> re-probe ->
    require an empty plan] -> artifacts

One host's failure neither stops nor loses the others: every host ends with an outcome.
Later phases (service, smoke, bench, collect) hang off the same per-host flow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.errors import OrchError, StepDidNotConverge
from orchestrator.events import (
    Emit,
    HostEnd,
    HostStart,
    PhaseEvent,
    Probed,
    Retry,
    StepEnd,
    StepStart,
)
from orchestrator.facts import Facts, ProbeRequest, probe
from orchestrator.inventory import Inventory
from orchestrator.lock import Holder, HostLock
from orchestrator.runs.records import HostSteps
from orchestrator.steps.base import Change, Step, StepPlan, apply_changes
from orchestrator.transport.base import Transport

StepStatus = Literal["ok", "changed", "pending", "failed", "skipped"]
# A phase after converge (ready, smoke, bench, collect): (transport, facts, outcome, emit).
Phase = Callable[[Transport, Facts, "HostOutcome", Emit], None]


@dataclass
class StepOutcome:
    step: str
    status: StepStatus
    changes: list[str] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    findings: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # what its commands printed, by name

    def event(self, host: str) -> StepEnd:
        return StepEnd(host, step=self.step, status=self.status, changes=list(self.changes),
                       findings=list(self.findings), seconds=round(self.seconds, 3),
                       error=self.error)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "changes": self.changes,
            "findings": self.findings,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


@dataclass
class HostOutcome:
    host: str
    steps: list[StepOutcome] = field(default_factory=list)
    error: str | None = None
    exit_code: int = 1  # of the error, when there is one (a busy lock has its own)
    round_trips: int = 0
    seconds: float = 0.0
    facts: Facts | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.error is not None or any(s.status == "failed" for s in self.steps)

    @property
    def changed(self) -> int:
        return sum(1 for s in self.steps if s.status in ("changed", "pending"))

    def record(self) -> HostSteps:
        """What the run folder keeps of this host (steps.json)."""
        return HostSteps.model_validate({
            "host": self.host, "error": self.error, "round_trips": self.round_trips,
            "seconds": round(self.seconds, 3), "steps": [s.to_json() for s in self.steps],
            **self.extra,
        })


@dataclass(frozen=True)
class LockRequest:
    """The apply locks to hold on each host (not in check mode)."""

    paths: tuple[str, ...]
    holder: Holder
    wait: bool = False
    break_lock: bool = False


@dataclass
class HostJob:
    """What to do on one host: its steps, and optional phases after converge."""

    host: str
    steps: list[Step]
    after: list[Phase] = field(default_factory=list)
    lock: LockRequest | None = None
    # Told when the host's run ends, however it ends (a multi-node server's gate).
    on_end: Callable[[HostOutcome], None] | None = None


def merged_request(steps: list[Step]) -> ProbeRequest:
    request = ProbeRequest()
    for step in steps:
        request = request.merge(step.request())
    return request


def _outcome_from_plan(plan: StepPlan, status: StepStatus, seconds: float) -> StepOutcome:
    return StepOutcome(
        step=plan.step,
        status=status,
        changes=[c.summary for c in plan.changes],
        diffs=[c.diff for c in plan.changes if c.diff],
        findings=[{"level": f.level, "message": f.message, "fix": f.fix} for f in plan.findings],
        seconds=seconds,
    )


def converge_host(
    transport: Transport, job: HostJob, *, check: bool, emit: Emit
) -> HostOutcome:
    """Probe, plan, and (unless `check`) take the apply lock, apply and verify every step on
    one host. An error ends the host's run but keeps what its steps did."""
    outcome = HostOutcome(host=job.host)
    lock: HostLock | None = None
    try:
        if job.lock is not None and not check:
            request = job.lock

            def waiting(holder: Holder | None) -> None:
                who = holder.describe() if holder is not None else "another apply"
                emit(PhaseEvent(job.host, phase="lock", status="running",
                                message=f"waiting for {who}"))

            # Started now, its answer read after the probe: the two overlap.
            lock = HostLock(transport, request.paths, request.holder, wait=request.wait,
                            break_lock=request.break_lock, on_wait=waiting)
        _converge(transport, job, outcome, check=check, emit=emit, lock=lock)
    except OrchError as error:
        outcome.error = str(error)
        outcome.exit_code = error.exit_code
    finally:
        if lock is not None:
            lock.release()
    return outcome


def _converge(
    transport: Transport, job: HostJob, outcome: HostOutcome, *, check: bool, emit: Emit,
    lock: HostLock | None = None,
) -> None:
    request = merged_request(job.steps)
    facts = probe(transport, request)
    outcome.facts = facts
    emit(Probed(job.host, seconds=facts.probe_seconds))
    if lock is not None:
        lock.acquire()
    applied_any = False
    for step in job.steps:
        started = time.monotonic()
        emit(StepStart(job.host, step=step.name))
        plan = step.plan(facts)
        if plan.blocked is not None:
            result = _outcome_from_plan(plan, "failed", time.monotonic() - started)
            result.error = plan.blocked
            result.changes = []  # nothing of it will happen
            outcome.steps.append(result)
            emit(result.event(job.host))
            break
        if check and plan.converged and step.follows_earlier_changes and any(
            s.status == "pending" for s in outcome.steps
        ):
            # The facts are from before the pending changes; apply will see their effect.
            plan.changes.append(Change(f"{step.name}: likely to change after the pending "
                                       "changes above (packages or config files)"))
        if plan.converged or check:
            status: StepStatus = "ok" if plan.converged else "pending"
            result = _outcome_from_plan(plan, status, time.monotonic() - started)
        else:
            outputs: dict[str, str] = {}
            try:
                apply_changes(transport, plan.changes, outputs)
            except OrchError as error:
                result = _outcome_from_plan(plan, "failed", time.monotonic() - started)
                result.error = str(error)
                result.outputs = outputs
                outcome.steps.append(result)
                emit(result.event(job.host))
                break
            applied_any = True
            # Later steps may depend on what this one changed (the venv a file lives in).
            facts = probe(transport, request)
            result = _outcome_from_plan(plan, "changed", time.monotonic() - started)
            result.outputs = outputs
            # What is still worth saying after the change: not the problems it just fixed.
            result.findings = _outcome_from_plan(step.plan(facts), "changed", 0).findings
        outcome.steps.append(result)
        emit(result.event(job.host))
    for step in job.steps[len(outcome.steps):]:  # after a failed step: say what did not run
        skipped = StepOutcome(step=step.name, status="skipped")
        outcome.steps.append(skipped)
        emit(skipped.event(job.host))
    if applied_any and not outcome.failed:
        # `facts` is the re-probe after the last applied step: verify against it.
        outcome.facts = facts
        leftover = [(s.name, s.plan(facts)) for s in job.steps if s.verify]
        pending = [(name, plan) for name, plan in leftover if not plan.converged]
        if pending:
            detail = "; ".join(
                f"{name}: {', '.join(c.summary for c in plan.changes)}" for name, plan in pending
            )
            raise StepDidNotConverge(
                f"{job.host}: still not converged after apply: {detail}",
                hint="a change did not take effect; see the step's findings and the host's logs",
            )
    if not check:
        # Also after a failed step: the phases collect what the host holds (the logs that
        # say why it failed); each skips what an earlier failure makes pointless.
        for phase in job.after:
            phase(transport, outcome.facts or facts, outcome, emit)


def run_hosts(
    jobs: list[HostJob],
    inventory: Inventory,
    *,
    check: bool,
    emit: Emit,
    connect: Callable[..., Transport] | None = None,
) -> list[HostOutcome]:
    """Converge every host in parallel; every host ends with an outcome."""
    if connect is None:
        from orchestrator.transport.connect import connect as default_connect

        connect = default_connect

    def one(job: HostJob) -> HostOutcome:
        started = time.monotonic()
        emit(HostStart(job.host))
        transport: Transport | None = None
        outcome: HostOutcome | None = None
        try:
            transport = connect(
                job.host,
                inventory,
                on_retry=lambda host, attempt, error: emit(
                    Retry(host, attempt=attempt, error=str(error))),
            )
            outcome = converge_host(transport, job, check=check, emit=emit)
        except OrchError as error:
            outcome = HostOutcome(host=job.host, error=str(error))
        except KeyboardInterrupt:
            raise
        finally:
            if job.on_end is not None:
                job.on_end(outcome or HostOutcome(host=job.host, error="its run was interrupted"))
            if transport is not None:
                round_trips = transport.round_trips
                transport.close()
            else:
                round_trips = 0
        outcome.round_trips = round_trips
        outcome.seconds = time.monotonic() - started
        emit(HostEnd(job.host, failed=outcome.failed, error=outcome.error,
                     changed=outcome.changed, round_trips=outcome.round_trips,
                     seconds=round(outcome.seconds, 3)))
        return outcome

    if len(jobs) == 1:  # in the main thread, so a benchmark can take Ctrl-C gracefully
        return [one(jobs[0])]
    # Daemon threads joined with a timeout: Ctrl-C reaches the main thread at once, and an
    # interrupted run does not wait for hosts still working before it can exit.
    results: dict[int, HostOutcome] = {}

    def work(index: int, job: HostJob) -> None:
        try:
            results[index] = one(job)
        except BaseException as error:  # a bug, not a host failure: keep the host's outcome
            results[index] = HostOutcome(host=job.host, error=f"internal error: {error!r}")

    threads = [threading.Thread(target=work, args=(i, job), daemon=True, name=f"host-{job.host}")
               for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.2)
    return [results[i] for i in range(len(jobs))]
