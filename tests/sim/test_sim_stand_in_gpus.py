"""The simulator's stand-in DCGM exporter: the exporter's text, read back by orch's own
parser (bench/dcgm.py), for the profile's GPUs; figures that follow what the engine did
(a real server under real load); and the calibrated model, whose steady figures get the
verdicts the limiter rules would give real GPUs (limits/rules.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from orchestrator.bench.dcgm import answers, parse_dcgm
from orchestrator.bench.gpu_figures import summarize_samples
from orchestrator.bench.samplers import Snapshot
from orchestrator.limits.evidence import gather
from orchestrator.limits.rules import limiter
from orchestrator.runs.run_records import LevelResult
from orchestrator.sim.dcgm_stand_in import STAND_IN_DCGM_PATH, render
from orchestrator.sim.gpus import GpuMeter, steady
from orchestrator.sim.profiles import KIMI_INT4, KIMI_NVFP4, MINIMAX_EP, PROFILES, Profile
from orchestrator.sim.testing import raw_batch, running_simulator


def _figures(text: str, gpu: int = 0) -> dict[str, float]:
    values, _ = parse_dcgm(text.splitlines())
    return {k.partition(".")[2]: v for k, v in values.items() if k.startswith(f"gpu{gpu}.")}


def test_the_page_is_the_exporters_text_and_parses_back() -> None:
    text = render(steady(KIMI_NVFP4, 64), 8, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "box")
    lines = text.splitlines()
    assert lines[0] == "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz)."
    assert lines[1] == "# TYPE DCGM_FI_DEV_SM_CLOCK gauge"
    assert 'gpu="7",UUID="GPU-' in text and 'device="nvidia7"' in text and 'Hostname="box"' in text
    _, gpus = parse_dcgm(lines)
    assert sorted(gpus) == list(range(8))
    assert gpus[3][1] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    got = _figures(text, 5)
    assert got["util_pct"] == 100 and got["power_limit_w"] == 600
    assert got["sm_active"] == pytest.approx(0.349, abs=0.001)
    assert got["pcie_rx_mb_s"] + got["pcie_tx_mb_s"] == pytest.approx(6888, rel=0.001)  # MB/s
    assert got["nvlink_mb_s"] == 0  # no NVLink on these GPUs
    assert got["mem_total_mib"] == 97887 and got["mem_used_mib"] < 97887
    assert got["mem_util_pct"] == 20  # the default counter, not DRAM_ACTIVE's 0.2 x 100 twice


def test_the_meter_counts_only_the_time_that_passed() -> None:
    meter = GpuMeter(KIMI_NVFP4, time_scale=0.1, now=0.0)
    meter.step(start=0.0, seconds=1.0, running=64, prefill=0)  # 0.1 wall seconds
    half = meter.read(now=0.05)
    assert half.util == pytest.approx(1.0) and half.sm_active == pytest.approx(0.4 * 0.9 * 64 / 66)
    assert KIMI_NVFP4.gpu is not None
    assert half.pcie_rx_bytes_s * 2 == pytest.approx(64 * KIMI_NVFP4.gpu.pcie_bytes_per_token)
    idle_after = meter.read(now=0.15)  # the rest of the step, then 0.05 s of nothing
    assert idle_after.util == pytest.approx(0.5) and idle_after.sm_clock_mhz == 2617
    assert meter.read(now=0.3).util == 0 and meter.read(now=0.3).power_w == 80  # idle: its idle draw


@pytest.mark.parametrize(("profile", "load", "expected"), [
    (KIMI_NVFP4, 64, "interconnect-bound"), (KIMI_NVFP4, 128, "interconnect-bound"),
    (MINIMAX_EP, 64, "compute-bound"), (MINIMAX_EP, 256, "compute-bound"),
    (KIMI_INT4, 128, "interconnect-bound"),
    (KIMI_NVFP4, 1, "not-enough-evidence"), (MINIMAX_EP, 1, "not-enough-evidence"),
    (KIMI_INT4, 1, "not-enough-evidence"),
])  # fmt: skip
def test_the_calibrated_figures_get_the_deployments_verdicts(profile: Profile, load: int, expected: str) -> None:
    reading = steady(profile, load)
    gpus = 8 if profile is not MINIMAX_EP else 4
    values, names = parse_dcgm(render(reading, gpus, "RTX").splitlines())
    block = summarize_samples([Snapshot(t, values) for t in (0.0, 1.0)], names, interval_s=1.0)
    level = LevelResult.model_validate({
        "level": f"c{load}", "mode": "batch", "max_concurrency": load, "completed": 2 * load,
        "failed": 0, "duration": 10.0, "gpu_telemetry": block})
    assert limiter(gather(level)).name == expected


def test_profiles_without_gpus_have_no_stand_in() -> None:
    assert PROFILES["instant"].gpu is None and PROFILES["tiny-qwen2-vllm-cpu-2-cores"].gpu is None
    assert PROFILES["kimi-k2.5-nvfp4-marlin-fallback"].gpu == KIMI_NVFP4.gpu


@pytest.mark.slow
def test_a_served_stand_in_follows_the_engine() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 48, "ignore_eos": True}
    with running_simulator(profile=MINIMAX_EP.name, time_scale=0.1, startup_time_scale=0.0005,
                           disable_log_stats=True) as sim:
        url = sim.url(STAND_IN_DCGM_PATH)
        assert answers(url)
        idle = _figures(httpx.get(url).text, 3)
        assert len(parse_dcgm(httpx.get(url).text.splitlines())[1]) == MINIMAX_EP.tensor_parallel
        assert idle["util_pct"] == 0 and idle["sm_active"] == 0 and idle["pcie_rx_mb_s"] == 0
        asyncio.run(raw_batch(sim.base_url, body, 1))
        single = _figures(httpx.get(url).text)
        asyncio.run(raw_batch(sim.base_url, body, 64))
        loaded = _figures(httpx.get(url).text)
    # busy within the last second read (SAMPLE_S): how much of it depends on how soon after
    # the batch the read came, which a loaded machine delays
    assert single["util_pct"] > 0 and loaded["util_pct"] > 0
    # more SMs busy with 64 sequences than with one (by how much depends on how much of the
    # last second read was the batch's: seen 0.11 against 0.09 in a fully loaded suite)
    assert loaded["sm_active"] > single["sm_active"] > 0
    assert loaded["pcie_rx_mb_s"] > 10 * single["pcie_rx_mb_s"] > 0
    assert loaded["power_w"] > idle["power_w"] and single["power_w"] > idle["power_w"]
    # the draw beyond what busy-but-waiting SMs explain follows SM activity; the total does
    # not always (a late read of the batch shows less util: seen 204 W against 237 W)
    gpu = MINIMAX_EP.gpu
    assert gpu is not None

    def computing_w(f: dict[str, float]) -> float:
        return f["power_w"] - gpu.idle_w - f["util_pct"] / 100 * (gpu.waiting_w - gpu.idle_w)

    for f in (single, loaded):  # within the rounding of the integer util percent
        expected = f["sm_active"] / gpu.sm_active_computing * (gpu.full_compute_w - gpu.waiting_w)
        assert computing_w(f) == pytest.approx(expected, abs=0.01 * (gpu.waiting_w - gpu.idle_w))
    assert loaded["sm_clock_mhz"] > idle["sm_clock_mhz"]


def test_a_profile_without_gpus_serves_none() -> None:
    with running_simulator(profile="instant", startup_time_scale=0.0005) as sim:
        assert httpx.get(sim.url(STAND_IN_DCGM_PATH)).status_code == 404
        assert not answers(sim.url(STAND_IN_DCGM_PATH))
