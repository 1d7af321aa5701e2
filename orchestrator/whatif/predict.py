"""A deployment's predicted curve: its model, GPU and flags through the formulas (anchored where
measured), and the motivating benchmark replayed on the result (batch mode, C requests at
once, answers of about 510 tokens), in model time: what the real box would do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.whatif.batch import run
from orchestrator.whatif.engine_cost import Engine
from orchestrator.whatif.limiter import limiter

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
