"""vLLM's router (`vllm-router`, a Rust binary in a wheel) as an engine: the fleet's front,
installed in a venv of its own and supervised like a model server. It serves no model of its
own and is ready when its /health answers (the fleet's readiness adds its workers: fleet/).

Its launch is `<venv>/bin/vllm-router --host --port` (the service's fields) plus the flags
orch writes from `router:` (Prometheus address, policy, P/D) and `router.args`, each checked
against its own `--help` (flags.py: flags-<version>.txt)."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.engines.base import Engine, FieldProblem, MetricNames
from orchestrator.engines.router.flags import args_problems
from orchestrator.engines.router.startup import RouterStartup
from orchestrator.plan.models import Plan

METRICS = MetricNames(prefix="vllm_router")


def launch_argv(model: str, venv_bin: str, pins: Mapping[str, str]) -> list[str]:
    return [f"{venv_bin}/vllm-router"]


def plan_check(plan: Plan) -> list[FieldProblem]:
    """`router.args` against the `--help` of the release `router.version` pins."""
    if plan.router is None:
        return []
    return args_problems(plan.router.args, plan.router.version)


ENGINE = Engine(
    name="router",
    summary="vLLM's router in front of a fleet's replicas (`vllm-router`)",
    display="vLLM's router",
    launch_argv=launch_argv,
    metrics=METRICS,
    startup=RouterStartup,
    api_key_env=None,  # it reads its workers' key from a flag only: orch gives it none
    stop_signal="SIGTERM",
    uses_gpus=False,
    plan_check=plan_check,
)
