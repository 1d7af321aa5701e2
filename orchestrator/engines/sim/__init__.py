"""The simulator (`orch sim serve`): speaks vLLM's protocol (its start-up lines, failure texts
and /metrics names, so vLLM's readers serve it too), runs from the orch wheel that the orch
step installs into the venv, and needs no GPU (a multi-node simulator declares GPUs to Ray
itself). Its settings have their own plan section, `service.sim`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from orchestrator.engines.base import Engine, FieldProblem
from orchestrator.engines.vllm import COLLECT_ENV, COMPILE_CACHE, METRICS, MULTI_NODE
from orchestrator.engines.vllm import FLAGS as VLLM_FLAGS
from orchestrator.engines.vllm.builds import RESERVED_FLAGS
from orchestrator.engines.vllm.flag_table import plan_flag_problems
from orchestrator.engines.vllm.phases import PhaseTracker
from orchestrator.engines.vllm.signatures import SIGNATURES
from orchestrator.plan.models import Plan, ServiceSpec
from orchestrator.sim.dcgm_stand_in import STAND_IN_DCGM_PATH
from orchestrator.sim.versions import DEFAULT_VLLM_VERSION

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
    "kv-link-gbps": "service.sim.kv_link_gbps",
}


def launch_argv(model: str, venv_bin: str, pins: Mapping[str, str]) -> list[str]:
    return [f"{venv_bin}/orch", "sim", "serve", model]


def _text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def sim_flags(service: ServiceSpec) -> list[str]:
    """`service.sim` as `orch sim serve` flags (the unset ones left to its defaults)."""
    sim = service.sim
    out = ["--profile", sim.profile, "--time-scale", _text(sim.time_scale)]
    optional: list[tuple[str, object]] = [
        ("--startup-time-scale", sim.startup_time_scale),
        ("--vllm-version", sim.vllm_version),
        ("--fail-at-startup", sim.fail_at_startup),
        ("--crash-after-requests", sim.crash_after_requests),
        ("--hang-after-requests", sim.hang_after_requests),
        ("--slow-start", sim.slow_start),
        ("--kv-link-gbps", sim.kv_link_gbps),
    ]
    for flag, value in optional:
        if value is not None:
            out += [flag, _text(value)]
    return out


def plan_check(plan: Plan) -> list[FieldProblem]:
    """The vLLM flags of `service.args`, against the vLLM release the simulator emulates: a
    simulated plan is a real one's twin, and its flags must hold there too."""
    assert plan.service is not None
    return plan_flag_problems(
        plan, plan.service.sim.vllm_version or DEFAULT_VLLM_VERSION,
        skip={**RESERVED_FLAGS, **SIM_FLAGS},
        source="the release the simulator emulates (service.sim.vllm_version)")


ENGINE = Engine(
    name="sim",
    summary="orch's vLLM-compatible simulator (`orch sim serve`)",
    display="the orch simulator",
    launch_argv=launch_argv,
    metrics=METRICS,
    startup=PhaseTracker,
    reserved_flags={**RESERVED_FLAGS, **SIM_FLAGS},
    own_flags=sim_flags,
    simulated=True,
    uses_gpus=False,
    signatures=SIGNATURES,  # it prints vLLM's texts for the failures it injects
    stand_in_dcgm=STAND_IN_DCGM_PATH,  # its profiles' GPUs, as their DCGM exporter would say
    plan_check=plan_check,
    flags=VLLM_FLAGS,  # it reads vLLM's flags (the ones its model uses; the rest it ignores)
    multi_node=MULTI_NODE,  # its groups join as vLLM's do (sim/cluster.py)
    env_collector=COLLECT_ENV,  # a real plan's twin: vLLM's, where its venv holds vLLM
    # vLLM's, and its own model of the box: the profile and the release it emulates
    compile_cache=replace(COMPILE_CACHE, key_flags=(*COMPILE_CACHE.key_flags, "profile",
                                                    "vllm-version")),
)
