"""How many GPUs served a run, and where that number comes from (pure).

vLLM uses tensor-parallel x pipeline-parallel x data-parallel GPUs (expert parallelism and
decode context parallelism reuse the same GPUs), whatever else the host has. So the plan
decides, in this order:

1. the parallelism flags of `service.args` or `service.extra_args`;
2. `CUDA_VISIBLE_DEVICES` in the plan's environment (one GPU per listed index);
3. a service without either runs on one GPU (vLLM's default);
4. without a service section (a benchmark of a server orch did not launch): the GPUs the
   host facts list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.plan.models import Plan

# Long flag name -> short label; vLLM also reads the underscore spelling.
PARALLEL_FLAGS = {
    "tensor-parallel-size": "TP",
    "pipeline-parallel-size": "PP",
    "data-parallel-size": "DP",
}
SHORT_FLAGS = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-dp": "data-parallel-size"}


@dataclass(frozen=True)
class GpuCount:
    count: int | None
    source: str  # e.g. "plan: TP 8", "plan: CUDA_VISIBLE_DEVICES", "host facts"

    def describe(self) -> str:
        return f"{self.count} ({self.source})" if self.count is not None else f"unknown ({self.source})"


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
        return number if number >= 1 else None
    return None


def _from_extra_args(extra: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for index, token in enumerate(extra):
        name, eq, inline = token.partition("=")
        flag = SHORT_FLAGS.get(name) or name.lstrip("-").replace("_", "-")
        if flag not in PARALLEL_FLAGS:
            continue
        raw = inline if eq else (extra[index + 1] if index + 1 < len(extra) else None)
        number = _positive_int(raw)
        if number is not None:
            found[flag] = number
    return found


def parallel_sizes(args: Mapping[str, Any], extra_args: Sequence[str] = ()) -> dict[str, int]:
    """The parallelism flags that are set: long name -> size."""
    found: dict[str, int] = {}
    for key, value in args.items():
        flag = key.replace("_", "-")
        number = _positive_int(value)
        if flag in PARALLEL_FLAGS and number is not None:
            found[flag] = number
    found.update(_from_extra_args(extra_args))
    return found


def visible_devices(env: Mapping[str, str | None]) -> int | None:
    value = env.get("CUDA_VISIBLE_DEVICES")
    if not isinstance(value, str):
        return None
    devices = [part for part in value.split(",") if part.strip()]
    return len(devices) or None


def gpu_count(plan: Plan | None, facts_gpus: Sequence[Any] | None) -> GpuCount:
    """The number of GPUs a run used, and which source said so."""
    if plan is not None and plan.service is not None:
        sizes = parallel_sizes(plan.service.args, plan.service.extra_args)
        if sizes:
            total = 1
            for size in sizes.values():
                total *= size
            parts = " x ".join(f"{PARALLEL_FLAGS[f]} {n}" for f, n in sizes.items())
            return GpuCount(total, f"plan: {parts}")
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
