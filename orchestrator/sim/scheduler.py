"""Continuous batching, as pure logic: no clock, no I/O.

One engine step = `plan_step()` (admit waiting requests within the running-batch limit, the
KV-cache budget and the per-step prefill budget; return the step's model duration), then,
once that time has passed, `complete_step(now)` (one token for every running sequence,
finished ones leave, KV overflow preempts the newest). The asyncio engine (`engine.py`)
drives it against the monotonic clock; `calibration.py` drives it in virtual time. Both see
exactly the same model.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from orchestrator.sim.profiles import Profile


class TokenSink(Protocol):
    """Receives a sequence's tokens as the engine produces them (see `http_app.py`)."""

    def on_token(self, seq: Sequence, finish: str | None) -> None: ...

    def on_error(self, seq: Sequence, message: str) -> None: ...


class StepObserver(Protocol):
    """Counts what the engine does (metrics, stats log line)."""

    def admitted(self, seq: Sequence, now: float, first: bool) -> None: ...

    def tokens(self, running: list[Sequence], now: float) -> None:
        """Each of `running` gets a token at `now` (called before their counts move on)."""

    def finished(self, seq: Sequence, now: float) -> None: ...

    def preempted(self, seq: Sequence) -> None: ...


@dataclass(eq=False, slots=True)
class Sequence:
    """One request inside the engine."""

    prompt_tokens: int
    max_tokens: int
    natural_tokens: int | None  # ends by itself (finish "stop") here; None = ignore_eos
    # finish "length" at max_tokens unless it stopped by itself first
    sink: TokenSink | None = None
    arrival: float = 0.0
    generated: int = 0
    admitted_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float = 0.0
    finish_reason: str | None = None
    aborted: bool = False
    remote_tokens: int = 0  # prompt tokens whose KV came by transfer: not computed here

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.generated


@dataclass(frozen=True, slots=True)
class StepPlan:
    seconds: float  # model seconds (before the time scale)
    running: int
    prefill_tokens: int


@dataclass
class Scheduler:
    profile: Profile
    max_num_seqs: int
    kv_capacity: int
    max_batched_tokens: int = 8192
    observer: StepObserver | None = None
    waiting: deque[Sequence] = field(default_factory=deque)
    running: list[Sequence] = field(default_factory=list)
    kv_used: int = 0
    aborted: int = 0  # aborted sequences not yet removed from `running`/`waiting`

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.running) or any(not s.aborted for s in self.waiting)

    def abort(self, seq: Sequence) -> None:
        """The client went away: the sequence leaves at the next step."""
        if not seq.aborted:
            seq.aborted = True
            self.aborted += 1

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.kv_capacity) if self.kv_capacity else 0.0

    def plan_step(self, now: float) -> StepPlan:
        """Admit what fits and return the duration of the step about to run."""
        self._purge_aborted()
        prefill = 0
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq.aborted:
                self.waiting.popleft()
                self.aborted -= 1
                continue
            need = seq.kv_tokens  # a preempted sequence recomputes its output too
            compute = need - seq.remote_tokens
            fits_kv = self.kv_used + need + 1 <= self.kv_capacity
            fits_budget = prefill + compute <= self.max_batched_tokens
            if self.running and not fits_kv:
                break
            if prefill and not fits_budget:
                break
            self.waiting.popleft()
            self.running.append(seq)
            self.kv_used += need
            prefill += compute
            first = seq.admitted_at is None
            if first:
                seq.admitted_at = now
            if self.observer is not None:
                self.observer.admitted(seq, now, first)
        seconds = self.profile.step_seconds(len(self.running), prefill)
        return StepPlan(seconds, len(self.running), prefill)

    def _purge_aborted(self) -> None:
        if self.aborted and any(s.aborted for s in self.running):
            for seq in self.running:
                if seq.aborted:
                    self.kv_used -= seq.kv_tokens
                    self.aborted -= 1
            self.running = [s for s in self.running if not s.aborted]

    def complete_step(self, now: float) -> int:
        """One token for every running sequence; return how many finished."""
        self._purge_aborted()
        observer = self.observer
        running = self.running
        if observer is not None:
            observer.tokens(running, now)
        finished = 0
        for seq in running:  # the hot loop: kept flat on purpose
            count = seq.generated + 1
            seq.generated = count
            if count == 1:
                seq.first_token_at = now
            seq.last_token_at = now
            natural = seq.natural_tokens
            if natural is not None and count >= natural:
                finish: str | None = "stop"
            elif count >= seq.max_tokens:
                finish = "length"
            else:
                finish = None
            if finish is not None:
                seq.finish_reason = finish
                finished += 1
            if seq.sink is not None:
                seq.sink.on_token(seq, finish)
        self.kv_used += len(self.running)
        if finished:
            keep = []
            for seq in self.running:
                if seq.finish_reason is None:
                    keep.append(seq)
                else:
                    self.kv_used -= seq.kv_tokens
                    if observer is not None:
                        observer.finished(seq, now)
            self.running = keep
        while self.kv_used > self.kv_capacity and len(self.running) > 1:
            victim = self.running.pop()
            self.kv_used -= victim.kv_tokens
            victim.remote_tokens = 0  # its KV is gone: recomputed when it comes back
            self.waiting.appendleft(victim)
            if observer is not None:
                observer.preempted(victim)
        return finished

    def fail_all(self, message: str) -> list[Sequence]:
        """The engine died: every running and waiting sequence gets the error."""
        victims = [s for s in (*self.running, *self.waiting) if not s.aborted]
        self.running = []
        self.waiting.clear()
        self.kv_used = 0
        self.aborted = 0
        for seq in victims:
            seq.finish_reason = "error"
            if seq.sink is not None:
                seq.sink.on_error(seq, message)
        return victims
