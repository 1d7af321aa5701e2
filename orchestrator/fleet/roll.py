"""The rolling redeploy: replica by replica (at most `max_unavailable` at once), out of the
router, drained, updated, ready, smoke-checked, back in. A replica whose new version fails
is restored to the previous run's frozen state and put back; the roll stops there and the
replicas not yet taken out stay as they were: the fleet keeps serving throughout.

    record = roll(members, router, ops, options=RollOptions(max_unavailable=1),
                  emit=emit, folder=run.path)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from orchestrator.errors import OrchError
from orchestrator.events import Emit
from orchestrator.fleet.drain import drain, replica_in_flight
from orchestrator.fleet.events import roll_step
from orchestrator.fleet.member import Member, ReplicaOps
from orchestrator.fleet.records import RollRecord, Swap, write_roll
from orchestrator.router_client import RouterClient

T = TypeVar("T")


@dataclass(frozen=True)
class RollOptions:
    max_unavailable: int = 1  # the plan's replicas.max_unavailable
    drain_timeout_s: float = 300.0  # a longer stream is cut by the update
    poll_s: float = 0.1  # how often the drain looks at the replica and the router
    add_timeout_s: float = 600.0  # the router waits for the worker's health before adding


def _quiet(_: object) -> None:
    return None


def roll(members: Sequence[Member], router: RouterClient, ops: ReplicaOps, *,
         options: RollOptions = RollOptions(), emit: Emit = _quiet,
         folder: Path | None = None) -> RollRecord:
    """Swap every member to the new version, in order; stop at the first that fails. An
    interruption (Ctrl-C) lets the swaps under way end, touches no other replica, and
    raises once the record says `interrupted`."""
    width = max(1, min(options.max_unavailable, len(members) - 1))  # one always serves
    state = _Roll(RollRecord(started=time.time(), replicas=[m.id for m in members],
                             max_unavailable=width, drain_timeout_s=options.drain_timeout_s),
                  folder)
    emit(roll_step("fleet", "start", f"{len(members)} replicas, {width} at a time"))

    def one(member: Member) -> None:
        if state.taken(member):
            swap = Swap(member.id, member.url, started=time.time())
            try:
                swap_one(member, router, ops, options, emit, swap)
            finally:
                state.done(swap)

    try:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="roll") as pool:
            futures = [pool.submit(one, member) for member in members]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                state.interrupt()
                raise
    finally:
        state.finish()
    record = state.record
    said = f"stopped at {record.stopped_by}" if record.stopped_by else "every replica swapped"
    emit(roll_step("fleet", "end", said, "ok" if record.outcome == "done" else "failed"))
    return record


class _Roll:
    """The record as the swaps end, from several threads; written after each."""

    def __init__(self, record: RollRecord, folder: Path | None) -> None:
        self.record, self.folder = record, folder
        self.stopped, self.interrupted = False, False
        self.lock = threading.Lock()

    def taken(self, member: Member) -> bool:
        """False once the roll stopped: the member stays as it is."""
        with self.lock:
            if self.stopped:
                self.record.untouched.append(member.id)
            return not self.stopped

    def done(self, swap: Swap) -> None:
        with self.lock:
            if swap.outcome == "pending":
                swap.outcome, self.interrupted = "interrupted", True
            self.record.swaps.append(swap)
            if not swap.ok:
                self.stopped = True
                self.record.stopped_by = self.record.stopped_by or swap.replica
            self._write()

    def interrupt(self) -> None:
        with self.lock:
            self.stopped = self.interrupted = True

    def finish(self) -> None:
        with self.lock:
            record = self.record
            record.untouched.sort(key=record.replicas.index)
            record.outcome = ("interrupted" if self.interrupted else
                              "stopped" if self.stopped else "done")
            record.finished = time.time()
            self._write()

    def _write(self) -> None:
        if self.folder is not None:
            write_roll(self.folder, self.record)


def swap_one(member: Member, router: RouterClient, ops: ReplicaOps, options: RollOptions,
             emit: Emit, swap: Swap) -> Swap:
    """One replica's swap (or its restore after a failed new version), filled in `swap` as
    it goes (an interruption leaves what was done so far)."""
    load = _load_of(router, member.url)
    with swap.phase("remove"):
        removed = _value(_attempt(swap, "remove", lambda: router.remove(member.url)))
    if removed is None or not removed[0]:
        swap.outcome, swap.error = "not_removed", swap.error or (removed or (False, ""))[1]
        emit(roll_step(member.id, "not removed", swap.error or "", "failed"))
        return swap
    now = replica_in_flight(member.url) or 0
    emit(roll_step(member.id, "draining", f"{now} in flight"))
    with swap.phase("drain"):
        swap.drained = drain(member.url, router, timeout_s=options.drain_timeout_s,
                             every_s=options.poll_s, in_flight=now, router_load=load)
    if swap.drained.timed_out:
        emit(roll_step(member.id, "drain timed out", f"{swap.drained.left} still in flight: "
                       "the update cuts them", "warning"))
    swap.before = _value(_attempt(swap, "version", lambda: ops.version(member), keep=False))
    if _new_version(member, ops, swap, emit):
        swap.after = _value(_attempt(swap, "version", lambda: ops.version(member), keep=False))
        _back_in(member, router, swap, False, options, emit)
    else:
        _restore(member, router, ops, swap, options, emit)
    return swap


def _new_version(member: Member, ops: ReplicaOps, swap: Swap, emit: Emit) -> bool:
    """update, ready, smoke: True when all three passed."""
    emit(roll_step(member.id, "updating", f"drained in {swap.drained.seconds:.1f}s"
                   if swap.drained else ""))
    with swap.phase("update"):
        if _attempt(swap, "update", lambda: ops.update(member)) is _FAILED:
            return False
    with swap.phase("ready"):
        ready = _value(_attempt(swap, "ready", lambda: ops.ready(member)))
    if ready is not True:
        swap.failed_at = swap.failed_at or "ready"
        swap.error = swap.error or "not ready within its start-up budget"
        emit(roll_step(member.id, "not ready", swap.error, "failed"))
        return False
    emit(roll_step(member.id, "ready", ""))
    with swap.phase("smoke"):
        problems = _value(_attempt(swap, "smoke", lambda: list(ops.smoke(member))))
    if problems is None or problems:
        swap.problems = list(problems or [])
        swap.failed_at = swap.failed_at or "smoke"
        swap.error = swap.error or "; ".join(swap.problems)
        emit(roll_step(member.id, "smoke failed", swap.error, "failed"))
        return False
    emit(roll_step(member.id, "smoke ok", ""))
    return True


def _restore(member: Member, router: RouterClient, ops: ReplicaOps, swap: Swap,
             options: RollOptions, emit: Emit) -> None:
    emit(roll_step(member.id, "restoring", f"the new version failed at {swap.failed_at}",
                   "warning"))
    with swap.phase("restore"):
        restored = _attempt(swap, "restore", lambda: ops.restore(member), keep=False)
    with swap.phase("restore_ready"):
        ready = restored is not _FAILED and _attempt(
            swap, "restore_ready", lambda: ops.ready(member), keep=False) is True
    if not ready:
        swap.outcome = "restore_failed"
        emit(roll_step(member.id, "restore failed", "left out of the router", "failed"))
        return
    swap.after = _value(_attempt(swap, "version", lambda: ops.version(member), keep=False))
    _back_in(member, router, swap, True, options, emit)


def _back_in(member: Member, router: RouterClient, swap: Swap, restored: bool,
             options: RollOptions, emit: Emit) -> None:
    with swap.phase("add"):
        added = _value(_attempt(swap, "add", lambda: router.add(member.url, options.add_timeout_s),
                                keep=False))
    if added is None or not added[0]:
        swap.outcome = "not_added"
        emit(roll_step(member.id, "not back in", (added or (False, "no answer"))[1], "failed"))
        return
    swap.outcome = "restored" if restored else "swapped"
    said = f"{swap.before or '?'} -> {swap.after or '?'}"
    emit(roll_step(member.id, "back in", f"restored, {said}" if restored else said,
                   "warning" if restored else "ok"))


class _Failed:
    """What `_attempt` returns for a call that raised (None can be a good answer)."""


_FAILED = _Failed()


def _attempt(swap: Swap, phase: str, call: Callable[[], T], *, keep: bool = True) -> T | _Failed:
    """`call()`, or _FAILED after it raised (its error kept on the swap: the first one
    wins when `keep`; a later one is only appended to the error). Any exception counts: a
    new version that fails in a way nobody foresaw must still be restored, not leave the
    fleet with a replica out of the router."""
    try:
        return call()
    except Exception as error:
        said = f"{phase}: {error}"
        if keep and swap.failed_at is None:
            swap.failed_at, swap.error = phase, said
        else:
            swap.error = f"{swap.error}; {said}" if swap.error else said
        return _FAILED


def _value(got: T | _Failed) -> T | None:
    return None if isinstance(got, _Failed) else got


def _load_of(router: RouterClient, url: str) -> int | None:
    """The router's load figure for `url` before it goes (None: not tracked, -1, or no answer)."""
    try:
        load = router.loads().get(url)
    except OrchError:
        return None
    return load if load is not None and load >= 0 else None
