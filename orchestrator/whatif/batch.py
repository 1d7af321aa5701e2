"""The motivating benchmark replayed on counts alone: C requests at once, each a prompt of
PROMPT_TOKENS and an answer of its natural length, through continuous batching (the same rules
as the simulator's scheduler, sim/scheduler.py: admit within the running limit, the KV cache
and the step's prefill budget; one token per running sequence per step; preempt the newest
when the cache overflows). Which steps run with which batch does not depend on their times,
so one schedule serves every set of constants (fit.py) and every cost (predict.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

PROMPT_TOKENS = 46  # the step-by-step-guide prompt in its chat framing
MEAN_RESPONSE_TOKENS = 510  # natural answer length (61.3 tok/s x 8.36 s)
RESPONSE_SPREAD = 0.15  # answers spread evenly over +-15% of it


@dataclass(frozen=True)
class Limits:
    """The engine's limits, all replicas together."""

    max_running: int
    kv_tokens: int
    max_batched_tokens: int = 8192


@dataclass(frozen=True)
class Schedule:
    steps: tuple[tuple[int, int], ...]  # (running, prefill tokens) of each step
    first: tuple[int, ...]  # per request: the step that gave its first token
    last: tuple[int, ...]  # per request: the step that gave its last token
    lengths: tuple[int, ...]
    most_running: int


def lengths(concurrency: int, max_tokens: int = 1024) -> list[int]:
    """Natural answer lengths of C requests, evenly over the spread, at most max_tokens."""
    low = MEAN_RESPONSE_TOKENS * (1 - RESPONSE_SPREAD)
    width = 2 * MEAN_RESPONSE_TOKENS * RESPONSE_SPREAD
    return [min(max_tokens, round(low + width * (i + 0.5) / concurrency))
            for i in range(concurrency)]


def _admit(waiting: deque[int], running: list[int], made: list[int], limits: Limits,
           kv_used: int) -> tuple[int, int]:
    """Admit what fits; (prefill tokens, KV used)."""
    prefill = 0
    while waiting and len(running) < limits.max_running:
        need = PROMPT_TOKENS + made[waiting[0]]
        if running and kv_used + need + 1 > limits.kv_tokens:
            break
        if prefill and prefill + need > limits.max_batched_tokens:
            break
        running.append(waiting.popleft())
        kv_used += need
        prefill += need
    return prefill, kv_used


def schedule(concurrency: int, limits: Limits, max_tokens: int = 1024) -> Schedule:
    sizes = lengths(concurrency, max_tokens)
    made = [0] * concurrency
    first = [-1] * concurrency
    last = [-1] * concurrency
    waiting: deque[int] = deque(range(concurrency))
    running: list[int] = []
    steps: list[tuple[int, int]] = []
    kv_used = most = 0
    while waiting or running:
        prefill, kv_used = _admit(waiting, running, made, limits, kv_used)
        step = len(steps)
        steps.append((len(running), prefill))
        most = max(most, len(running))
        for i in running:
            made[i] += 1
            if made[i] == 1:
                first[i] = step
        kv_used += len(running)
        done = [i for i in running if made[i] >= sizes[i]]
        for i in done:
            last[i] = step
            kv_used -= PROMPT_TOKENS + made[i]
        if done:
            running = [i for i in running if made[i] < sizes[i]]
        while kv_used > limits.kv_tokens and len(running) > 1:
            victim = running.pop()
            kv_used -= PROMPT_TOKENS + made[victim]
            waiting.appendleft(victim)
    return Schedule(tuple(steps), tuple(first), tuple(last), tuple(sizes), most)


@dataclass(frozen=True)
class EngineCost:
    """An engine step's model seconds: base + per_seq x running + prefill x prompt tokens (all
    replicas together), and the limits it runs within."""

    base_s: float
    per_seq_s: float
    prefill_per_token_s: float
    limits: Limits

    def step_seconds(self, running: int, prefill: int = 0) -> float:
        return self.base_s + self.per_seq_s * running + self.prefill_per_token_s * prefill


@dataclass(frozen=True)
class LevelTimes:
    concurrency: int
    wall_s: float
    tokens: int
    mean_ttft_s: float
    mean_tpot_s: float
    most_running: int

    @property
    def throughput(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


def run(cost: EngineCost, concurrency: int, max_tokens: int = 1024) -> LevelTimes:
    """One batch level's figures in model seconds."""
    plan = schedule(concurrency, cost.limits, max_tokens)
    ends: list[float] = []
    now = 0.0
    for running, prefill in plan.steps:
        now += cost.step_seconds(running, prefill)
        ends.append(now)
    ttft = [ends[f] for f in plan.first]
    tpot = [(ends[last] - ends[f]) / (n - 1) if n > 1 else 0.0
             for f, last, n in zip(plan.first, plan.last, plan.lengths, strict=True)]
    return LevelTimes(concurrency, now, sum(plan.lengths), sum(ttft) / concurrency,
                      sum(tpot) / concurrency, plan.most_running)
