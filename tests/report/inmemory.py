"""Runs built in memory from level results (no folder behind them), for the pure tests of
the comparison: `level(8, ...)` is a level result's keys, `run("a", levels=[...])` a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.plan.models import Bench, Plan
from orchestrator.runs.reader import BenchData, HostData, RunData
from orchestrator.runs.run_records import LevelResult, Meta, SweepSummary

BASE_CONFIG = Bench().model_dump(mode="json")


def level(c: int, *, simulated: bool = False, chat: bool = True, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "level": f"c{c}",
        "mode": "closed",
        "max_concurrency": c,
        "output_throughput": 50.0 * c,
        "mean_e2el_ms": 1000.0,
        "median_e2el_ms": 1000.0,
        "p99_e2el_ms": 1200.0,
        "completed": c,
        "failed": 0,
        "partial": False,
        "flags": [],
        "simulated": simulated,
        "endpoint_type": "openai-chat" if chat else "openai",
        "model_id": "m",
    }
    if simulated:
        out["time_scale"] = 0.05
        out["normalized"] = {"time_scale": 0.05, "output_throughput": 2.5 * c, "mean_e2el_ms": 20000.0}
    out.update(extra)
    return out


def run(
    name: str,
    *,
    config: dict[str, Any] | None = None,
    levels: list[dict[str, Any]] | None = None,
    status: str = "complete",
    engine: str = "vllm",
    tp: int = 8,
    knee: int | None = None,
) -> RunData:
    plan_engine = "sim" if engine == "sim" else "vllm"
    plan = Plan.model_validate(
        {"name": name, "service": {"model": "m", "engine": plan_engine, "args": {"tensor-parallel-size": tp}}}
    )
    chosen = levels if levels is not None else [level(1), level(2)]
    summary = SweepSummary(config=config if config is not None else BASE_CONFIG, knee=knee)
    bench = BenchData(Path(f"/runs/{name}/bench"), [LevelResult.model_validate(lv) for lv in chosen],
                      summary)
    meta = Meta(plan=name, status=status, engine=engine)
    return RunData(Path(f"/runs/{name}/20260101T000000Z-00000000"), meta, plan, None, [HostData("h", None, bench)])
