"""The engine model run in virtual time: what a profile predicts for a benchmark.

`batch_run` replays the motivating benchmark (C requests at once, wall time until all finish)
through the same `Scheduler` the server uses, without any clock, so tests and
`benchmarks/sim_capacity.py` can compare the server's real timing with the model, and the
profiles' calibration can be checked in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.sim.profiles import Profile, kv_cache_tokens
from orchestrator.sim.scheduler import Scheduler, Sequence
from orchestrator.sim.textgen import build_script, chat_prompt_tokens

# The motivating benchmark's prompt ("write a detailed step-by-step guide ...").
GUIDE_PROMPT = (
    "Write a detailed step-by-step guide to setting up a home server for self-hosting "
    "web applications, covering hardware, operating system, networking and security."
)


@dataclass(frozen=True)
class BatchResult:
    concurrency: int
    wall_seconds: float  # model seconds until the last request finished
    generated_tokens: int
    steps: int
    mean_latency: float

    @property
    def throughput(self) -> float:
        return self.generated_tokens / self.wall_seconds if self.wall_seconds else 0.0


def batch_run(
    profile: Profile,
    concurrency: int,
    *,
    prompt: str = GUIDE_PROMPT,
    max_tokens: int = 1024,
    first_key: int = 0,
    max_num_seqs: int | None = None,
    ignore_eos: bool = False,
    kv_cache_dtype: str | None = None,
) -> BatchResult:
    """C requests at once on a fresh engine; keys first_key.. as the server's counter gives.

    `kv_cache_dtype` is `--kv-cache-dtype` (None: the profile's): it sizes the KV cache, which
    bounds how many sequences run at once (the rest wait, or are preempted when it fills).
    """
    scheduler = Scheduler(
        profile=profile,
        max_num_seqs=max_num_seqs or profile.max_num_seqs,
        kv_capacity=kv_cache_tokens(profile, kv_cache_dtype),
    )
    prompt_tokens = chat_prompt_tokens([prompt])
    sequences = []
    for i in range(concurrency):
        script = build_script(prompt, str(first_key + i), thinking=True)
        natural = None if ignore_eos else script.natural_tokens
        seq = Sequence(prompt_tokens=prompt_tokens, max_tokens=max_tokens, natural_tokens=natural)
        sequences.append(seq)
        scheduler.add(seq)
    now = 0.0
    steps = 0
    while scheduler.has_work():
        now += scheduler.plan_step(now).seconds
        scheduler.complete_step(now)
        steps += 1
    latencies = [s.last_token_at for s in sequences]
    return BatchResult(
        concurrency=concurrency,
        wall_seconds=now,
        generated_tokens=sum(s.generated for s in sequences),
        steps=steps,
        mean_latency=sum(latencies) / len(latencies),
    )
