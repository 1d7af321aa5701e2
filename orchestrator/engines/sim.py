"""The simulator (`orch sim serve`): speaks vLLM's protocol, runs from the orch wheel that the
orch step installs into the venv, and needs no GPU (a multi-node simulator declares GPUs to
Ray itself)."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.engines.base import Engine
from orchestrator.engines.vllm import RESERVED_FLAGS
from orchestrator.engines.vllm_signatures import SIGNATURES

# Flags with their own field under `service.sim:`.
SIM_FLAGS = {
    "profile": "service.sim.profile",
    "time-scale": "service.sim.time_scale",
    "startup-time-scale": "service.sim.startup_time_scale",
    "vllm-version": "service.sim.vllm_version",
    "fail-at-startup": "service.sim.fail_at_startup",
    "crash-after-requests": "service.sim.crash_after_requests",
    "hang-after-requests": "service.sim.hang_after_requests",
    "slow-start": "service.sim.slow_start",
}


def launch_argv(model: str, venv_bin: str, pins: Mapping[str, str]) -> list[str]:
    return [f"{venv_bin}/orch", "sim", "serve", model]


ENGINE = Engine(
    name="sim",
    summary="orch's vLLM-compatible simulator (`orch sim serve`)",
    launch_argv=launch_argv,
    reserved_flags={**RESERVED_FLAGS, **SIM_FLAGS},
    simulated=True,
    uses_gpus=False,
    reads_vllm=False,
    signatures=SIGNATURES,  # it prints vLLM's texts for the failures it injects
)
