"""A profile at the flags `orch sim serve` was given: its step costs, KV cache, memory and
stand-in GPU figures from the what-if model (orchestrator/whatif/), so a TP4 x DP2 variant of
a plan serves a different curve than TP8, and one whose weights do not fit fails at start-up
with vLLM's CUDA out-of-memory error.

The profile keeps its name, model, GPU and kernels; its measured deployment (whatif/anchors.py)
is the base the flags change. DP replicas share one scheduler: DP times max-num-seqs, the KV
cache and the prefill budget, each step priced at b / DP sequences per replica. Profiles with
no measured deployment (instant, tiny-cpu: no GPU) stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from orchestrator.sim.profiles import Profile
from orchestrator.whatif.anchors import BY_PROFILE
from orchestrator.whatif.costs import Box
from orchestrator.whatif.deployment import Deployment, with_flags
from orchestrator.whatif.engine_cost import Engine, engine

# The vLLM flags the what-if model reads (beside the simulator's own --max-num-seqs,
# --max-num-batched-tokens, --kv-cache-dtype, --max-model-len, --pipeline-parallel-size).
MODELLED_FLAGS = frozenset({
    "tensor-parallel-size", "tp", "data-parallel-size", "dp", "enable-expert-parallel", "ep",
    "gpu-memory-utilization",
})  # fmt: skip


@dataclass(frozen=True)
class Deployed:
    profile: Profile  # the profile at these flags (per replica: KV tokens, step per replica)
    deployment: Deployment | None  # None: a profile without a measured deployment
    engine: Engine | None

    @property
    def replicas(self) -> int:
        return self.deployment.dp if self.deployment is not None else 1

    @property
    def failure(self) -> str | None:
        """The start-up failure the deployment meets (a --fail-at-startup kind), if any."""
        if self.engine is None or self.engine.fits:
            return None
        return "kv-cache" if self.engine.why_not.startswith("no memory") else "cuda-oom"


def deploy(profile: Profile, flags: Mapping[str, object]) -> Deployed:
    """`profile` at `flags` (vLLM flag names without dashes -> value, None for a bare flag)."""
    measured = BY_PROFILE.get(profile.name)
    if measured is None or profile.gpu is None:
        return Deployed(profile, None, None)
    deployment = with_flags(measured.box.deployment, flags)
    box = Box(measured.box.model, measured.box.gpu, measured.box.links, deployment)
    eng = engine(box)
    cost = eng.cost
    at_flags = replace(
        profile,
        step_base_s=cost.base_s, step_per_seq_s=cost.per_seq_s,
        prefill_per_token_s=cost.prefill_per_token_s,
        kv_cache_tokens=eng.kv_tokens_per_replica, kv_cache_dtype=deployment.kv_cache_dtype,
        max_num_seqs=deployment.max_num_seqs, tensor_parallel=deployment.tp,
        weights_gib=round(eng.weights_gib, 2), kv_cache_gib=round(eng.kv_cache_gib, 2),
        gpu=replace(profile.gpu, allreduce_wait=eng.allreduce_wait,
                    pcie_bytes_per_token=eng.link_bytes_per_token),
    )
    return Deployed(at_flags, deployment, eng)
