"""Converge one host: probe (one round trip: unless checking, the program that takes the
apply locks runs the probe once it holds them), plan every step (pure), and unless checking
apply, re-probe and require an empty plan; then the stages after
converge (service readiness, smoke, bench, collect: lifecycle.py).

    connect -> [lock +] probe -> plan every step -> [apply -> re-probe -> verify] -> stages

An error ends the host's run but keeps what its steps did. The probe also reads the host's
install record: the apply says whether the install is unchanged since it last converged
(install_gate.py), and records it after a converge that succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.apply.install_gate import INSTALL_STEPS, InstallGate
from orchestrator.errors import OrchError, StepDidNotConverge
from orchestrator.events import Emit, Probed, StageEvent, StepStart
from orchestrator.facts import Facts, ProbeRequest, probe
from orchestrator.facts.answer import parse_answer
from orchestrator.facts.probe import PROBE_TIMEOUT_S, build_stdin
from orchestrator.holder import Holder
from orchestrator.runs.outcome import HostOutcome, StepOutcome, StepStatus
from orchestrator.service.lock import HostLock, LockGuard
from orchestrator.steps.base import Change, Step, StepPlan, apply_changes
from orchestrator.transport.base import Transport

# A stage after converge (ready, smoke, bench, collect): (transport, facts, outcome, emit,
# guard); a long one asks the guard, as it goes, whether the host's locks are still ours.
Stage = Callable[[Transport, Facts, HostOutcome, Emit, LockGuard], None]


@dataclass(frozen=True)
class LockRequest:
    """The apply locks to hold on each host (not in check mode)."""

    paths: tuple[str, ...]
    holder: Holder
    wait: bool = False
    break_lock: bool = False


@dataclass
class HostJob:
    """What to do on one host: its steps, and optional stages after converge."""

    host: str
    steps: list[Step]
    after: list[Stage] = field(default_factory=list)
    lock: LockRequest | None = None
    # Told when the host's run ends, however it ends (a multi-node server's gate).
    on_end: Callable[[HostOutcome], None] | None = None
    install: InstallGate | None = None  # the install record: skip an unchanged install
    # A fleet's replica: its locks end with its converge (launched), so that the next replica
    # of its host converges while this one starts; the stages run without them.
    release_before_stages: bool = False


def job_request(job: HostJob) -> ProbeRequest:
    """What the host's probe answers: every step's facts, and the install record."""
    request = merged_request(job.steps)
    return job.install.request(request) if job.install is not None else request


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

            def waiting(who: str) -> None:
                emit(StageEvent(job.host, stage="lock", status="running",
                                message=f"waiting for {who}"))

            def took_over(said: str) -> None:  # a dead apply's lock, or --break-lock
                emit(StageEvent(job.host, stage="lock", status="warning", message=said))

            # One remote program takes the locks, then runs the fact program: the facts
            # are read under the locks, in one round trip.
            lock = HostLock(transport, request.paths, request.holder, wait=request.wait,
                            break_lock=request.break_lock, on_wait=waiting,
                            on_takeover=took_over,
                            probe=build_stdin(job_request(job)))
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
    request = job_request(job)
    guard = LockGuard(job.host, lock)
    if lock is not None:
        lock.acquire()
        facts = parse_answer(lock.probed(timeout=PROBE_TIMEOUT_S))
    else:
        facts = probe(transport, request)
    emit(Probed(job.host, seconds=facts.probe_seconds))
    recorded = job.install is not None and job.install.recorded(facts)
    _say_install(job, facts, emit)
    outcome.facts = facts
    applied_any = False
    for step in job.steps:
        guard.check(f"before the {step.name} step")
        emit(StepStart(job.host, step=step.name))
        result, facts, applied = _one_step(transport, job, step, facts, request, outcome,
                                           check=check, emit=emit)
        applied_any = applied_any or applied
        outcome.steps.append(result)
        emit(result.event(job.host))
        if result.status == "failed":
            break
    for step in job.steps[len(outcome.steps):]:  # after a failed step: say what did not run
        skipped = StepOutcome(step=step.name, status="skipped")
        outcome.steps.append(skipped)
        emit(skipped.event(job.host))
    if applied_any and not outcome.failed:
        # `facts` is the re-probe after the last applied step: verify against it.
        outcome.facts = facts
        _verify(job, facts)
    installed = any(o.status == "changed" and o.step in INSTALL_STEPS for o in outcome.steps)
    if not check and not outcome.failed and job.install is not None and \
            (installed or not recorded):
        _record_install(transport, job.host, job.install, emit)
    if not check:
        guard.check("after converge")
        if job.release_before_stages and lock is not None:
            lock.release()
            guard = LockGuard(job.host, None)
        # Also after a failed step: the stages collect what the host holds (the logs that
        # say why it failed); each skips what an earlier failure makes pointless.
        for stage in job.after:
            stage(transport, outcome.facts or facts, outcome, emit, guard)


def _say_install(job: HostJob, facts: Facts, emit: Emit) -> None:
    """Whether the install is skipped, and why not (install_gate.py)."""
    if job.install is None:
        return
    verdict = job.install.verdict(facts, job.steps)
    if verdict.line is not None:
        emit(StageEvent(job.host, stage="install", status=verdict.status, message=verdict.line))


def _record_install(transport: Transport, host: str, gate: InstallGate, emit: Emit) -> None:
    """The install converged: record it on the host (best effort: without the record the next
    apply converges in full, as before)."""
    try:
        transport.put(gate.record(), gate.path)
    except OrchError as error:
        emit(StageEvent(host, stage="install", status="warning",
                        message=f"could not record the install in {gate.path}: {error}"))


def _one_step(transport: Transport, job: HostJob, step: Step, facts: Facts, request: ProbeRequest,
              outcome: HostOutcome, *, check: bool,
              emit: Emit | None = None) -> tuple[StepOutcome, Facts, bool]:
    """Plan one step on the facts, and apply it unless checking: its outcome, the facts
    after it (a re-probe when it changed something) and whether it did."""
    started = time.monotonic()
    plan = step.plan(facts)
    if plan.blocked is not None:
        result = _outcome_from_plan(plan, "failed", time.monotonic() - started)
        result.error = plan.blocked
        result.changes = []  # nothing of it will happen
        return result, facts, False
    if check and plan.converged and step.follows_earlier_changes and any(
        s.status == "pending" for s in outcome.steps
    ):
        # The facts are from before the pending changes; apply will see their effect.
        plan.changes.append(Change(f"{step.name}: likely to change after the pending "
                                   "changes above (packages or config files)"))
    if plan.converged or check:
        status: StepStatus = "ok" if plan.converged else "pending"
        return _outcome_from_plan(plan, status, time.monotonic() - started), facts, False
    outputs: dict[str, str] = {}
    done: list[Change] = []
    try:
        apply_changes(transport, plan.changes, outputs, emit, done)
    except OrchError as error:
        result = _outcome_from_plan(plan, "failed", time.monotonic() - started)
        failing = plan.changes[len(done)]
        result.changes = [c.summary for c in done] + [failing.summary]  # not what never ran
        result.error = _naming(str(error), job.host, failing)
        result.outputs = outputs
        return result, facts, False
    # Later steps may depend on what this one changed (the venv a file lives in).
    facts = probe(transport, request)
    result = _outcome_from_plan(plan, "changed", time.monotonic() - started)
    result.outputs = outputs
    # What is still worth saying after the change: not the problems it just fixed.
    result.findings = _outcome_from_plan(step.plan(facts), "changed", 0).findings
    return result, facts, True


def _naming(error: str, host: str, change: Change) -> str:
    """The error of a failed change with the change named first (`run NAME`, `write PATH`):
    which of the step's changes failed, not only that the step did."""
    what = change.summary.split(": ")[0].split(" (")[0]
    said = error.removeprefix(f"{host}: ")
    if said.startswith(what):
        return error
    return f"{host}: {what}: {said}" if said != error else f"{what}: {error}"


def _verify(job: HostJob, facts: Facts) -> None:
    """Every verified step must be converged on the facts after apply."""
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
