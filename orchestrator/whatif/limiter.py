"""What limits a deployment's peak, said in one word and one line.

In this order: the KV cache holds fewer sequences than the levels ask for and max-num-seqs
allows (kv-capacity); max-num-seqs stops the batch where doubling it would still give 25% more
tokens (scheduler-cap); the GPUs wait on the links for half of a step or more (the all-reduce
wait the stand-in telemetry shows: interconnect-bound); else the larger of the step's memory
reads (weights and KV: memory-bandwidth-bound) and its work (matmuls, per-layer and
per-sequence kernels: compute-bound), at the most sequences it runs.
"""

from __future__ import annotations

from orchestrator.whatif.batch import MEAN_RESPONSE_TOKENS, PROMPT_TOKENS
from orchestrator.whatif.engine_cost import Engine

CAP_GAIN = 1.25  # scheduler-cap: twice the batch would give this much more throughput
WAIT_BOUND = 0.5  # interconnect-bound: this share of a step waits on the links


def limiter(eng: Engine, highest: int) -> tuple[str, str]:
    """(limiter, why) of the engine at the highest concurrency asked for."""
    d, cost = eng.box.deployment, eng.cost
    held = eng.kv_tokens_per_replica // (PROMPT_TOKENS + MEAN_RESPONSE_TOKENS)
    if held < d.max_num_seqs and highest > held * d.dp:
        return "kv-capacity", (f"the KV cache holds {held} answers of ~{PROMPT_TOKENS + MEAN_RESPONSE_TOKENS}"
                               f" tokens per replica, fewer than max-num-seqs {d.max_num_seqs}")
    cap = cost.limits.max_running
    if highest > cap:
        now = cap / cost.step_seconds(cap)
        doubled = 2 * cap / cost.step_seconds(2 * cap)
        if doubled >= CAP_GAIN * now:
            return "scheduler-cap", (f"max-num-seqs {d.max_num_seqs} caps the batch: twice as many "
                                     f"would give {100 * (doubled / now - 1):.0f}% more tokens/s")
    links = eng.box.links.kind
    if eng.allreduce_wait >= WAIT_BOUND:
        return "interconnect-bound", (f"TP{d.tp} all-reduces over {links} take "
                                      f"{100 * eng.allreduce_wait:.0f}% of a step")
    parts = eng.parts_at_peak
    memory = parts.weights + parts.kv
    work = parts.compute + parts.sequences + parts.overhead
    share = max(memory, work) / parts.total if parts.total else 0.0
    if memory >= work:
        return "memory-bandwidth-bound", (f"weight and KV reads take {100 * share:.0f}% of a step "
                                          f"at {cap // d.dp} sequences per replica")
    return "compute-bound", (f"kernels (matmuls, attention, per-layer work) take {100 * share:.0f}% "
                             f"of a step at {cap // d.dp} sequences per replica")
