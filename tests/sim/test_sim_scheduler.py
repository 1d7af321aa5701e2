"""The batching model as pure logic: admission limits, budgets, finish reasons, preemption."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.sim.profiles import INSTANT
from orchestrator.sim.scheduler import Scheduler, Sequence

PROFILE = replace(INSTANT, step_base_s=0.01, step_per_seq_s=0.001, prefill_per_token_s=0.0001)


@dataclass
class Recorder:
    tokens: list[tuple[int, str | None]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def on_token(self, seq: Sequence, finish: str | None) -> None:
        self.tokens.append((seq.generated, finish))

    def on_error(self, seq: Sequence, message: str) -> None:
        self.errors.append(message)


def make(n: int, *, prompt: int = 10, max_tokens: int = 5, natural: int | None = None) -> list[Sequence]:
    return [Sequence(prompt, max_tokens, natural, Recorder()) for _ in range(n)]


def run(scheduler: Scheduler, limit: int = 10_000) -> tuple[float, int]:
    now, steps = 0.0, 0
    while scheduler.has_work() and steps < limit:
        now += scheduler.plan_step(now).seconds
        scheduler.complete_step(now)
        steps += 1
    return now, steps


@pytest.mark.parametrize(
    ("natural", "max_tokens", "count", "reason"),
    [(5, 10, 5, "stop"), (None, 3, 3, "length"), (10, 4, 4, "length"), (4, 4, 4, "stop")],
)
def test_a_sequence_ends_by_itself_or_at_max_tokens(
    natural: int | None, max_tokens: int, count: int, reason: str
) -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=4, kv_capacity=10_000)
    (seq,) = make(1, max_tokens=max_tokens, natural=natural)
    scheduler.add(seq)
    run(scheduler)
    assert (seq.generated, seq.finish_reason) == (count, reason)
    assert isinstance(seq.sink, Recorder)
    assert seq.sink.tokens == [(i, None) for i in range(1, count)] + [(count, reason)]


def test_at_most_max_num_seqs_run_and_the_rest_wait() -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=2, kv_capacity=10_000)
    seqs = make(3, max_tokens=2)
    for seq in seqs:
        scheduler.add(seq)
    plan = scheduler.plan_step(0.0)
    assert (plan.running, len(scheduler.waiting)) == (2, 1)
    assert plan.seconds == pytest.approx(0.01 + 0.001 * 2 + 0.0001 * 20)
    scheduler.complete_step(1.0)
    assert scheduler.plan_step(1.0).running == 2  # nobody finished yet: the third still waits
    scheduler.complete_step(2.0)
    assert [s.finish_reason for s in seqs] == ["length", "length", None]
    assert scheduler.plan_step(2.0).running == 1


def test_the_kv_budget_holds_back_what_does_not_fit() -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=8, kv_capacity=24)
    seqs = make(2, prompt=12, max_tokens=3)
    for seq in seqs:
        scheduler.add(seq)
    assert scheduler.plan_step(0.0).running == 1  # 12 + 12 + 1 > 24
    assert scheduler.kv_usage == pytest.approx(12 / 24)


def test_the_prefill_budget_spreads_admission_over_steps() -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=8, kv_capacity=10_000, max_batched_tokens=100)
    for seq in make(3, prompt=60):
        scheduler.add(seq)
    assert [scheduler.plan_step(0.0).prefill_tokens for _ in range(3)] == [60, 60, 60]


def test_kv_overflow_preempts_the_newest_which_resumes_later() -> None:
    preempted: list[Sequence] = []

    class Observer:
        def admitted(self, seq: Sequence, now: float, first: bool) -> None: ...
        def tokens(self, running: list[Sequence], now: float) -> None: ...
        def finished(self, seq: Sequence, now: float) -> None: ...
        def preempted(self, seq: Sequence) -> None:
            preempted.append(seq)

    scheduler = Scheduler(PROFILE, max_num_seqs=8, kv_capacity=30, observer=Observer())
    seqs = make(2, prompt=10, max_tokens=8)
    for seq in seqs:
        scheduler.add(seq)
    run(scheduler)
    assert preempted and preempted[0] is seqs[1]
    assert [s.generated for s in seqs] == [8, 8]


def test_an_aborted_sequence_leaves_and_frees_its_cache() -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=8, kv_capacity=1000)
    a, b = make(2, max_tokens=50)
    scheduler.add(a)
    scheduler.add(b)
    scheduler.plan_step(0.0)
    scheduler.complete_step(1.0)
    scheduler.abort(a)
    scheduler.plan_step(1.0)
    assert scheduler.running == [b]
    assert scheduler.kv_used == b.kv_tokens


def test_fail_all_sends_the_error_to_running_and_waiting() -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=1, kv_capacity=1000)
    seqs = make(2)
    for seq in seqs:
        scheduler.add(seq)
    scheduler.plan_step(0.0)
    assert scheduler.fail_all("dead") == seqs
    assert all(isinstance(s.sink, Recorder) and s.sink.errors == ["dead"] for s in seqs)
    assert not scheduler.has_work()


requests = st.lists(
    st.tuples(st.integers(1, 50), st.integers(1, 40), st.one_of(st.none(), st.integers(1, 40))),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(requests, st.integers(1, 6), st.integers(60, 400), st.integers(16, 200))
def test_every_request_gets_its_tokens_in_order_within_the_limits(
    specs: list[tuple[int, int, int | None]], max_seqs: int, capacity: int, budget: int
) -> None:
    scheduler = Scheduler(PROFILE, max_num_seqs=max_seqs, kv_capacity=capacity, max_batched_tokens=budget)
    seqs = [Sequence(p, m, n, Recorder()) for p, m, n in specs]
    for seq in seqs:
        scheduler.add(seq)
    now, steps = 0.0, 0
    while scheduler.has_work() and steps < 5000:
        plan = scheduler.plan_step(now)
        assert plan.running <= max_seqs
        now += plan.seconds
        scheduler.complete_step(now)
        assert len(scheduler.running) <= 1 or scheduler.kv_used <= capacity
        steps += 1
    for seq, (_, max_tokens, natural) in zip(seqs, specs, strict=True):
        expected = min(natural or max_tokens, max_tokens)
        assert seq.generated == expected
        assert isinstance(seq.sink, Recorder)
        assert [n for n, _ in seq.sink.tokens] == list(range(1, expected + 1))
