"""The shipped simulated pivots tell the seed's story through their stand-in GPUs: applied on
this machine (no nvidia-smi, so apply reads the simulator's stand-in DCGM exporter on its
own port), Kimi-K2.5 NVFP4 (TP8 over PCIe) is named interconnect-bound at C=64 and
MiniMax-M2.5 (TP4 + expert parallel) compute-bound at its top level, by the same rules real
GPUs' telemetry meets (limits/rules.py), read from the level files apply wrote.

Only what keeps it short is overridden: no smoke tests, a two-level sweep of few short requests, the test's
own venv (shared by both applies, the second replacing the first service), port and name,
and GPU sampling often enough that a level holds many samples (the first one of a level
covers the pause before it, when the GPUs idle)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port

from orchestrator.limits.evidence import gather
from orchestrator.limits.rules import limiter
from orchestrator.runs.run_records import LevelResult

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _sets(tmp_path: Path, port: int, max_tokens: int = 96) -> list[str]:
    sets = ["bench.concurrency=[1,64]", "bench.requests_per_level=1x", f"bench.max_tokens={max_tokens}",
            "bench.ignore_eos=true", "bench.warmup=0", "bench.gpu_telemetry=0.05s",
            "service.sim.time_scale=1.0", "service.sim.startup_time_scale=0.001",
            "smoke=[]",  # at time scale 1 the smoke tests' answers took 16 s of each apply
            f"python.venv={tmp_path}/venv", f"python.interpreter={quick_venv.interpreter()}",
            f"service.port={port}",
            f"service.name=limiters-{tmp_path.name[-8:]}"]
    return [arg for value in sets for arg in ("--set", value)]


def _level(run: Path, label: str) -> LevelResult:
    return LevelResult.model_validate_json((run / "hosts/localhost/bench" / f"level-{label}.json").read_text())


def test_the_simulated_pivots_name_their_limiters(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {"localhost": {"connection": "local"}}}))
    port = free_port()
    sets = _sets(tmp_path, port)
    verdicts = {}
    starved: dict[str, object] = {}  # a run whose top level the client could not drive
    runs = []
    try:
        # kimi's clear margins (traffic, SM activity) hold in shorter levels; minimax's SM
        # activity (0.89 while it steps) needs its level long beside the idle ramp before it
        for name, max_tokens in (("kimi-nvfp4", 32), ("minimax-m2.5", 96)):
            plan = ROOT / "plans" / "sim" / f"{name}.yaml"
            applied = orch("apply", plan, "-i", inventory, *_sets(tmp_path, port, max_tokens), cwd=tmp_path)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            run = last_run(tmp_path)
            runs.append(run)
            for label in ("c1", "c64"):
                level = _level(run, label)
                gpu = level.extra("gpu_telemetry")
                assert gpu is not None and gpu["source"] == "dcgm-exporter", gpu
                evidence = gather(level)
                recorded = limiter(evidence)
                assert level.limiter is not None and level.limiter["name"] == recorded.name
                if recorded.name == "client-bound":  # the client starved on a busy machine:
                    starved[name] = recorded       # what the GPUs' figures say without it
                    evidence = replace(evidence, client_cpu=None, client_loop_lag_ms=None,
                                       client_late_share=None)
                verdicts[name, label] = (limiter(evidence), gpu)
    finally:
        orch("stop", ROOT / "plans/sim/minimax-m2.5.yaml", "-i", inventory, *sets, cwd=tmp_path)
    kimi, kimi_gpu = verdicts["kimi-nvfp4", "c64"]
    assert kimi.name == "interconnect-bound", (kimi, kimi_gpu)
    assert kimi_gpu["gpu_count"] == 8 and kimi_gpu["mean_pcie_rx_mb_s"] + kimi_gpu["mean_pcie_tx_mb_s"] >= 5000
    minimax, minimax_gpu = verdicts["minimax-m2.5", "c64"]
    assert minimax.name == "compute-bound", (minimax, minimax_gpu)
    assert minimax_gpu["gpu_count"] == 4 and minimax_gpu["mean_sm_active"] >= 0.8
    # compared: each run's plateau and why, and that the pivot moved the bottleneck
    compared = orch("compare", *runs, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    said = " ".join(compared.stdout.split())
    assert "Why it plateaus" in said
    for name, named in (("kimi-nvfp4", "interconnect-bound"), ("minimax-m2.5", "compute-bound")):
        if name not in starved:  # compare reports what the level recorded: client-bound there
            assert f"sim-{name}: still rising, {named} at C=64" in said, compared.stdout
    if not starved:
        assert "The limiter differs between runs" in said
    for name in ("kimi-nvfp4", "minimax-m2.5"):  # one stream: latency, no limiter forced
        single, single_gpu = verdicts[name, "c1"]
        assert single.name not in ("interconnect-bound", "compute-bound"), (name, single, single_gpu)
        assert single_gpu["mean_sm_active"] < 0.5
