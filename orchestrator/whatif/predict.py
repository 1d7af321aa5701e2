"""A plan's predicted curve: its model, GPU and flags through the formulas (anchored where
measured), and the motivating benchmark replayed on the result (batch mode, C requests at
once, answers of about 510 tokens), in model time: what the real box would do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.whatif.anchors import BOX_GPUS, BY_PROFILE
from orchestrator.whatif.batch import run
from orchestrator.whatif.costs import Box
from orchestrator.whatif.deployment import Deployment, with_flags
from orchestrator.whatif.engine_cost import Engine, engine
from orchestrator.whatif.errors import WhatIfUnknown
from orchestrator.whatif.hardware import DEFAULT_GPU, gpu, links_of
from orchestrator.whatif.hf_config import read_config
from orchestrator.whatif.limiter import limiter
from orchestrator.whatif.shapes import ModelShape, known_model

if TYPE_CHECKING:
    from orchestrator.plan.models import Plan

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
KNEE_SHARE = 0.9  # the knee: the lowest concurrency reaching this share of the peak


@dataclass(frozen=True)
class PredictedLevel:
    max_concurrency: int
    output_throughput: float  # tok/s, model time
    mean_ttft_ms: float
    mean_tpot_ms: float
    mean_e2el_ms: float
    duration: float  # model seconds until the last request finished
    total_output_tokens: int
    running: int  # the most sequences that ran at once
    waiting: int  # requests that waited for a place at the start

    def as_result(self) -> dict[str, float | int]:
        """The level as vllm bench serve's result keys (orch's level files use the same)."""
        return {"max_concurrency": self.max_concurrency, "completed": self.max_concurrency,
                "duration": self.duration, "total_output_tokens": self.total_output_tokens,
                "request_throughput": self.max_concurrency / self.duration if self.duration else 0.0,
                "output_throughput": self.output_throughput, "mean_ttft_ms": self.mean_ttft_ms,
                "mean_tpot_ms": self.mean_tpot_ms, "mean_e2el_ms": self.mean_e2el_ms,
                "max_running": self.running, "max_waiting": self.waiting}


@dataclass(frozen=True)
class Prediction:
    fits: bool
    why: str  # the memory line when it does not fit, else the limiter's reason
    levels: tuple[PredictedLevel, ...]
    peak_output_throughput: float
    knee: int
    limiter: str
    model: str
    gpu: str
    deployment: str
    anchored: bool  # scaled from a measured deployment of this model and GPU
    memory: str  # the memory line (weights per GPU against the budget)
    kv_cache_tokens: int  # per replica


def predict_engine(eng: Engine, concurrency: Sequence[int], max_tokens: int = 1024) -> Prediction:
    box = eng.box
    common = {"model": box.model.name, "gpu": box.gpu.name, "deployment": box.deployment.label(),
              "anchored": eng.anchored, "memory": eng.why_not,
              "kv_cache_tokens": eng.kv_tokens_per_replica}
    if not eng.fits:
        return Prediction(fits=False, why=eng.why_not, levels=(), peak_output_throughput=0.0,
                          knee=0, limiter="does-not-fit", **common)  # type: ignore[arg-type]
    levels = []
    for c in sorted(set(concurrency)):
        t = run(eng.cost, c, max_tokens)
        levels.append(PredictedLevel(
            max_concurrency=c, output_throughput=t.throughput, mean_ttft_ms=1000 * t.mean_ttft_s,
            mean_tpot_ms=1000 * t.mean_tpot_s, mean_e2el_ms=1000 * (t.mean_ttft_s + t.mean_tpot_s *
                                                                    (t.tokens / c - 1)),
            duration=t.wall_s, total_output_tokens=t.tokens, running=t.most_running,
            waiting=max(0, c - min(c, eng.cost.limits.max_running))))
    peak = max(level.output_throughput for level in levels)
    knee = next(lv.max_concurrency for lv in levels if lv.output_throughput >= KNEE_SHARE * peak)
    name, why = limiter(eng, max(concurrency))
    return Prediction(fits=True, why=why, levels=tuple(levels), peak_output_throughput=peak,
                      knee=knee, limiter=name, **common)  # type: ignore[arg-type]


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
        base, model, spec = Deployment(), _shape(plan, config), gpu(gpu_name or DEFAULT_GPU)
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
