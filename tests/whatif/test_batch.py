"""The batch benchmark on counts: answers spread around 510 tokens, admission within the
running limit, the prefill budget and the KV cache, preemption when the cache overflows, and
a level's wall time, TTFT and TPOT from a linear step cost."""

from __future__ import annotations

import statistics

import pytest

from orchestrator.whatif.batch import (
    MEAN_RESPONSE_TOKENS,
    PROMPT_TOKENS,
    EngineCost,
    Limits,
    lengths,
    run,
    schedule,
)

AMPLE = Limits(max_running=1024, kv_tokens=10_000_000)


def test_answers_spread_evenly_around_510_within_max_tokens() -> None:
    assert lengths(1) == [MEAN_RESPONSE_TOKENS]
    spread = lengths(200)
    assert statistics.mean(spread) == pytest.approx(510, abs=1)
    assert min(spread) >= 433 and max(spread) <= 587
    assert max(lengths(50, max_tokens=300)) == 300


def test_all_at_once_when_everything_fits() -> None:
    plan = schedule(32, AMPLE)
    assert set(plan.first) == {0} and plan.most_running == 32
    assert len(plan.steps) == max(plan.lengths)
    assert plan.steps[0] == (32, 32 * PROMPT_TOKENS)


def test_the_prefill_budget_spreads_admission_over_steps() -> None:
    plan = schedule(256, Limits(max_running=1024, kv_tokens=10_000_000, max_batched_tokens=8192))
    first_step = 8192 // PROMPT_TOKENS
    assert plan.steps[0] == (first_step, first_step * PROMPT_TOKENS)
    assert plan.first[first_step] == 1 and plan.first[-1] == 1


def test_the_running_limit_makes_the_rest_wait() -> None:
    plan = schedule(4, Limits(max_running=2, kv_tokens=10_000_000))
    assert plan.most_running == 2
    assert plan.first[2] == plan.last[0] + 1  # admitted when the first answer is done


def test_an_overflowing_cache_preempts_and_still_finishes_every_answer() -> None:
    tight = Limits(max_running=8, kv_tokens=3 * (PROMPT_TOKENS + MEAN_RESPONSE_TOKENS))
    plan = schedule(8, tight)
    ample = schedule(8, AMPLE)
    generated = sum(running for running, _ in plan.steps)
    assert generated == sum(plan.lengths)  # every token once: a preempted answer keeps its own
    assert len(plan.steps) > 1.5 * len(ample.steps)  # all admitted, then about three fit


def test_a_levels_times_follow_the_step_cost() -> None:
    cost = EngineCost(base_s=0.01, per_seq_s=0.001, prefill_per_token_s=0.0001, limits=AMPLE)
    one = run(cost, 1)
    assert one.wall_s == pytest.approx(510 * 0.011 + PROMPT_TOKENS * 0.0001)
    assert one.mean_ttft_s == pytest.approx(0.011 + PROMPT_TOKENS * 0.0001)
    assert one.mean_tpot_s == pytest.approx(0.011)
    assert one.throughput == pytest.approx(510 / one.wall_s)
    assert run(cost, 64).throughput > 5 * one.throughput  # the batch shares the base
