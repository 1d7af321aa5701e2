"""How many GPUs served a run, and where that number comes from (pure).

A server uses tensor-parallel x pipeline-parallel x data-parallel GPUs (expert parallelism and
decode context parallelism reuse the same GPUs), whatever else the host has. So the plan
decides, in this order:

1. the parallelism flags of `service.args` or `service.extra_args`, in the plan's engine's
   own names (`Engine.layout`, engines/layout.py: the one reading of them);
2. `CUDA_VISIBLE_DEVICES` in the plan's environment (one GPU per listed index);
3. a service without either runs on one GPU (vLLM's default);
4. without a service section (a benchmark of a server orch did not launch): the GPUs the
   host facts list.

A real server on a host where the probe found no nvidia-smi (vLLM's CPU build) used no GPU:
its count is unknown, and no figure is given per GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.engines import engine
from orchestrator.plan.models import Plan


@dataclass(frozen=True)
class GpuCount:
    count: int | None
    source: str  # e.g. "plan: TP 8", "plan: CUDA_VISIBLE_DEVICES", "host facts"

    def describe(self) -> str:
        return f"{self.count} ({self.source})" if self.count is not None else f"unknown ({self.source})"


def visible_devices(env: Mapping[str, str | None]) -> int | None:
    value = env.get("CUDA_VISIBLE_DEVICES")
    if not isinstance(value, str):
        return None
    devices = [part for part in value.split(",") if part.strip()]
    return len(devices) or None


def gpu_count(plan: Plan | None, facts_gpus: Sequence[Any] | None, *,
              gpu_host: bool = True) -> GpuCount:
    """The number of GPUs a run used, and which source said so. `gpu_host`: False for a
    real server on a host without nvidia-smi."""
    if not gpu_host:
        return GpuCount(None, "no GPUs on the host (no nvidia-smi)")
    if plan is not None and plan.service is not None:
        found = engine(plan.service.engine).layout(plan.service.args, plan.service.extra_args)
        if found.describe():
            return GpuCount(found.total_gpus, f"plan: {found.describe()}")
        devices = visible_devices(plan.env)
        if devices is not None:
            return GpuCount(devices, "plan: CUDA_VISIBLE_DEVICES")
        return GpuCount(1, "plan: no parallelism flags")
    if plan is not None:
        devices = visible_devices(plan.env)
        if devices is not None:
            return GpuCount(devices, "plan: CUDA_VISIBLE_DEVICES")
    if facts_gpus:
        return GpuCount(len(facts_gpus), "host facts")
    return GpuCount(None, "no parallelism in the plan, no GPUs in the host facts")
