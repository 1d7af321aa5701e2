"""Why a compared run plateaus (report/plateaus.py), for a benchmark without a plan: the
advice is in the flags of the engine its record names, and in words for a server orch does
not launch, never in vLLM's flags for another engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.report.series import plateau_of
from orchestrator.runs.reader import BenchData, HostData, RunData
from orchestrator.runs.run_records import LevelResult, Meta


def capped(c: int, throughput: float) -> LevelResult:
    """A level whose server ran 64 requests at most while the rest waited, its KV cache half full."""
    return LevelResult.model_validate({
        "level": f"c{c}", "mode": "closed", "max_concurrency": c, "completed": 2 * c,
        "failed": 0, "duration": 10.0, "output_throughput": throughput,
        "client_cpu_utilization": 0.3, "max_concurrent_requests": c, "mean_input_tokens": 100.0,
        "mean_ttft_ms": 200.0, "mean_itl_ms": 20.0,
        "server_metrics": {"scrapes": 10, "source": "vllm", "max_running": 64,
                           "max_waiting": max(0, c - 64), "max_kv_cache_usage": 0.5}})


def planless(engine: str | None) -> RunData:
    levels = [capped(32, 600.0), capped(64, 1000.0), capped(128, 1010.0)]
    bench = BenchData(Path("/bench"), levels, None)
    return RunData(Path("/bench"), Meta(engine=engine), None, None, [HostData("h", None, bench)],
                   source="bench")


@pytest.mark.parametrize(("engine", "matrix", "named"), [
    ("vllm", {"service.args.max-num-seqs": [128, 256]}, "--max-num-seqs"),
    ("sglang", {"service.args.max-running-requests": [128, 256]}, "--max-running-requests"),
    (None, {}, "the scheduler's cap on running requests"),
    ("llama", {}, "the scheduler's cap on running requests"),  # measured, not launched
])
def test_a_planless_bench_is_advised_in_its_engines_flags(
        engine: str | None, matrix: dict[str, list[int]], named: str) -> None:
    run = planless(engine)
    found = plateau_of(run, run.hosts[0], (None, "not found"), 0.05)
    assert found.verdict is not None and found.verdict.name == "scheduler-cap"
    assert [s.matrix for s in found.suggestions] == [matrix]
    assert named in found.verdict.why
