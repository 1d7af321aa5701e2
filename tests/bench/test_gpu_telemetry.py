"""GPU telemetry: nvidia-smi's CSV read robustly, a level's figures (power, energy,
throttling) from its samples, and the sampler over a real local shell and a real sshd with
the stand-in nvidia-smi (tests/fixtures/fake_nvidia_smi.py) on the host's PATH; a host
without nvidia-smi records `source: none` and nothing fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fixtures import fake_nvidia_smi as fake
from fixtures.gpu import SCRIPT, GpuSshServer, install
from fixtures.sshd import SshServer

from orchestrator.bench.gpu_figures import (
    QUERY,
    WindowEnd,
    energy_figures,
    energy_joules,
    group_lines,
    merge_summaries,
    parse_line,
    summarize_samples,
    throttled_samples,
    without_cut_round,
)
from orchestrator.bench.gpu_telemetry import NO_NVIDIA_SMI, GpuSampler
from orchestrator.bench.samplers import Snapshot
from orchestrator.bench.sweep import run_sweep
from orchestrator.plan.models import Bench
from orchestrator.sim.testing import running_simulator
from orchestrator.transport import connect
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LocalTransport

UUID = "GPU-5f2a1c30-8b7d-4e21-9a6f-0c3d2e1b4a00"
NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

# -- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "index", "values"),
    [
        (f"0, {UUID}, {NAME}, 85.32, 600.00, 3, 1, 1024, 97887, 34, 180", 0,
         {"power_w": 85.32, "power_limit_w": 600.0, "util_pct": 3, "mem_util_pct": 1,
          "mem_used_mib": 1024, "mem_total_mib": 97887, "temp_c": 34, "sm_clock_mhz": 180}),
        (f"3, {UUID}, {NAME}, 412.10 W, 600.00 W, 97 %, 61 %, 91388 MiB, 97887 MiB, 79, 2617 MHz", 3,
         {"power_w": 412.1, "power_limit_w": 600.0, "util_pct": 97, "mem_util_pct": 61,
          "mem_used_mib": 91388, "mem_total_mib": 97887, "temp_c": 79, "sm_clock_mhz": 2617}),
        (f"7, {UUID}, {NAME}, [N/A], [Not Supported], 0 %, [N/A], 1 MiB, 97887 MiB, 41, 180 MHz", 7,
         {"util_pct": 0, "mem_used_mib": 1, "mem_total_mib": 97887, "temp_c": 41, "sm_clock_mhz": 180}),
        (f"1, {UUID}, {NAME}, N/A, [Unknown Error], garbage, 5, 6, 7, 8, 9", 1,
         {"mem_util_pct": 5, "mem_used_mib": 6, "mem_total_mib": 7, "temp_c": 8, "sm_clock_mhz": 9}),
        (f"2, {UUID}, Tesla, Inc. GPU, 1, 2, 3, 4, 5, 6, 7, 8", 2,  # a comma in the name
         {"power_w": 1, "power_limit_w": 2, "util_pct": 3, "mem_util_pct": 4, "mem_used_mib": 5,
          "mem_total_mib": 6, "temp_c": 7, "sm_clock_mhz": 8}),
    ],
)
def test_a_line_is_read_with_or_without_units_and_without_its_missing_fields(
        line: str, index: int, values: dict[str, float]) -> None:
    reading = parse_line(line)
    assert reading is not None
    assert reading.index == index
    assert reading.uuid == UUID
    assert reading.values == values
    if index == 2:
        assert reading.name == "Tesla, Inc. GPU"


@pytest.mark.parametrize("line", [
    "index, uuid, name, power.draw [W], power.limit [W], utilization.gpu [%], utilization.memory [%], "
    "memory.used [MiB], memory.total [MiB], temperature.gpu, clocks.current.sm [MHz]",
    "", "   ", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "0, GPU-x, name, 1, 2",  # too few fields
    "zero, GPU-x, n, 1, 2, 3, 4, 5, 6, 7, 8",  # no index
    "-1, GPU-x, n, 1, 2, 3, 4, 5, 6, 7, 8",
    "0, , n, 1, 2, 3, 4, 5, 6, 7, 8",  # no uuid
])
def test_headers_and_garbage_are_not_readings(line: str) -> None:
    assert parse_line(line) is None


def test_a_reading_out_of_range_is_left_out_and_kept_to_be_said() -> None:
    """Finite but no GPU's: a 400-digit power (float() makes it inf), 250 % busy; an index of
    23 digits is no GPU at all (issue 38, item 15)."""
    reading = parse_line(f"0, {UUID}, {NAME}, {'9' * 400}, 600, 250, 4, 5, 6, 7, 8")
    assert reading is not None
    assert reading.values == {"power_limit_w": 600, "mem_util_pct": 4, "mem_used_mib": 5,
                              "mem_total_mib": 6, "temp_c": 7, "sm_clock_mhz": 8}
    assert [why.split(" is ")[0] for why in reading.impossible] == ["GPU 0 power_w inf", "GPU 0 util_pct 250"]
    assert parse_line(f"12345678901234567890123, {UUID}, {NAME}, 1, 2, 3, 4, 5, 6, 7, 8") is None
    grouped = group_lines([(0.0, f"0, {UUID}, {NAME}, 1e999, 600, 250, 4, 5, 6, 7, 8")])
    assert len(grouped.impossible) == 1  # 1e999 is no number nvidia-smi writes: garbage
    assert "power_w" not in grouped.snapshots[0].values


def test_the_stand_in_prints_what_the_parser_reads_in_both_formats() -> None:
    query = "--query-gpu=" + ",".join(QUERY)
    for style in ("csv", "csv,noheader,nounits"):
        out = subprocess.run([sys.executable, str(SCRIPT), query, f"--format={style}"],
                             capture_output=True, text=True, check=True, timeout=30).stdout
        lines = out.splitlines()
        assert len(lines) == (9 if style == "csv" else 8)
        readings = [r for r in map(parse_line, lines) if r is not None]
        assert [r.index for r in readings] == list(range(8))
        assert readings[0].name == NAME and readings[0].uuid.startswith("GPU-")
        assert readings[0].values["power_limit_w"] == 600.0
        assert "power_w" not in readings[7].values and "mem_util_pct" not in readings[7].values
        if style == "csv":
            assert " W, " in lines[1] and lines[0].startswith("index, uuid, name, power.draw [W]")
    listed = subprocess.run([sys.executable, str(SCRIPT), "-L"], capture_output=True, text=True,
                            check=True, timeout=30).stdout.splitlines()
    assert len(listed) == 8 and listed[0] == f"GPU 0: {NAME} (UUID: {fake.uuid(0)})"
    refused = subprocess.run([sys.executable, str(SCRIPT), "--query-gpu=nope", "--format=csv"],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and 'Field "nope" is not a valid field' in refused.stdout


def _line(index: int, power: float | str = 100.0, clock: int = 2000, temp: int = 60,
          limit: float | str = 600.0) -> str:
    return f"{index}, GPU-{index:08x}, {NAME}, {power}, {limit}, 90, 40, 1000, 97887, {temp}, {clock}"


def test_a_round_is_timed_by_its_first_line_even_when_the_rest_comes_with_the_next() -> None:
    # how the local transport's buffered pipe hands them over: a round's first line at
    # once, the rest only when the next round's data arrives
    timed = [(0.10, _line(0)), (0.60, _line(1)), (0.60, _line(2)), (0.60, _line(0)),
             (1.10, _line(1)), (1.10, _line(2)), (1.10, "garbage"), (1.10, _line(0)),
             (1.60, "index, uuid, name, power.draw [W], ..."), (1.60, _line(0, clock=1)),
             (1.60, "orch-nvidia-smi-exit 15")]
    grouped = group_lines(timed)
    assert [s.t_s for s in grouped.snapshots] == [0.10, 0.60, 1.10, 1.60]
    assert [len(s.values) for s in grouped.snapshots] == [24, 24, 8, 8]
    assert grouped.snapshots[3].values["gpu0.sm_clock_mhz"] == 1
    assert grouped.unparsed == ["garbage"]
    assert grouped.exit_code == 15
    assert grouped.gpus[1] == ("GPU-00000001", NAME)
    # the last round, cut by the stop, is left out; a complete one is kept
    assert without_cut_round(grouped.snapshots[:3]) == grouped.snapshots[:2]
    assert without_cut_round(grouped.snapshots[:2]) == grouped.snapshots[:2]
    assert without_cut_round(grouped.snapshots[:1]) == grouped.snapshots[:1]


# -- figures -------------------------------------------------------------------------------


def _samples(rows: list[tuple[float, dict[int, dict[str, float]]]]) -> list[Snapshot]:
    return [Snapshot(t, {f"gpu{i}.{k}": v for i, vals in gpus.items() for k, v in vals.items()})
            for t, gpus in rows]


def test_energy_is_the_trapezoid_of_the_total_power_held_to_the_window_edges() -> None:
    assert energy_joules([], 5.0) == 0.0
    # 100 W held from 0 to 1 s, ramp to 300 W at 3 s (400 J), held to 4 s
    assert energy_joules([(1.0, 100.0), (3.0, 300.0)], 4.0) == pytest.approx(100 + 400 + 300)
    snaps = _samples([(1.0, {0: {"power_w": 60.0}, 1: {"power_w": 40.0}}),
                      (2.0, {0: {"power_w": 100.0}}),  # GPU 1's power missing: left out of the total
                      (3.0, {0: {"power_w": 200.0}, 1: {"power_w": 100.0}})])
    summary = summarize_samples([*snaps, WindowEnd(4.0, {"unparsed": 0.0})])
    assert summary["energy_j"] == pytest.approx(100 + 400 + 300)
    assert (summary["mean_power_w"], summary["max_power_w"]) == (200.0, 300.0)
    assert summary["window_s"] == 4.0 and summary["samples"] == 3 and summary["gpu_count"] == 2
    assert [p["power_w"] for p in summary["timeline"]] == [100.0, None, 300.0]
    assert summary["gpus"][0]["mean_power_w"] == pytest.approx(120.0)
    # without a WindowEnd the window ends at the last sample
    assert summarize_samples(snaps)["energy_j"] == pytest.approx(100 + 400)


@pytest.mark.parametrize(
    ("samples", "count", "reasons"),
    [
        # clock down 30% from its peak at the power limit: power throttling
        ([(2600, 590, 70), (1800, 590, 70), (1800, 600, 70)], 2, ["power"]),
        # down and hot, power well below its limit
        ([(2600, 300, 80), (2000, 300, 86), (2000, 300, 90)], 2, ["temperature"]),
        ([(2600, 590, 80), (1800, 590, 88), (1800, 590, 88)], 2, ["power", "temperature"]),
        # a clock that drops with the load (an idle GPU): power low, cool
        ([(2600, 500, 70), (400, 90, 40), (180, 80, 38)], 0, []),
        # at the limit but the clock held within 10%
        ([(2600, 600, 70), (2400, 600, 70), (2350, 600, 84)], 0, []),
        # down at the limit once
        ([(2600, 590, 70), (1800, 590, 70), (2600, 590, 70)], 1, ["power"]),
    ],
)
def test_throttling_is_a_clock_drop_at_the_power_limit_or_hot(
        samples: list[tuple[float, float, float]], count: int, reasons: list[str]) -> None:
    rows = [{"sm_clock_mhz": c, "power_w": p, "power_limit_w": 600.0, "temp_c": t} for c, p, t in samples]
    assert throttled_samples(rows) == (count, reasons)
    summary = summarize_samples(_samples([(i / 2, {4: row}) for i, row in enumerate(rows)]))
    assert summary["throttled"] is (count >= 2)
    assert summary["throttled_gpus"] == ([4] if count >= 2 else [])
    assert summary["gpus"][0]["throttle_reasons"] == reasons


def test_a_gpu_without_a_power_limit_throttles_only_when_hot() -> None:
    rows = [{"sm_clock_mhz": c, "power_w": 600.0, "temp_c": 70.0} for c in (2600, 1500, 1500)]
    assert throttled_samples(rows) == (0, [])


def test_a_repeat_with_no_sample_says_why() -> None:
    assert summarize_samples([WindowEnd(3.0, {"exit_code": 9.0}, "NVIDIA-SMI has failed")]) == {
        "source": "nvidia-smi", "samples": 0, "reason": "NVIDIA-SMI has failed"}
    assert summarize_samples([])["reason"] == "nvidia-smi gave no sample during the repeat"


def _repeat(power: float, samples: int, window: float, throttled: bool) -> dict[str, Any]:
    snaps = _samples([(i * window / samples, {0: {"power_w": power, "util_pct": 50.0, "sm_clock_mhz": 2000.0},
                                              1: {"power_w": power, "util_pct": 100.0, "sm_clock_mhz": 1000.0}})
                      for i in range(samples)])
    out = summarize_samples([*snaps, WindowEnd(window, {})], {0: ("GPU-a", "A"), 1: ("GPU-b", "B")},
                            interval_s=1.0)
    out["throttled"], out["gpus"][1]["throttled"] = throttled, throttled
    return out


def test_repeats_merge_into_the_level_block() -> None:
    one, two = _repeat(100.0, 2, 2.0, False), _repeat(400.0, 6, 6.0, True)
    merged = merge_summaries([one, two])
    assert merged is not None
    assert merged["samples"] == 8 and merged["window_s"] == 8.0
    assert merged["energy_j"] == pytest.approx(200 * 2 + 800 * 6)
    assert merged["mean_power_w"] == pytest.approx((200 * 2 + 800 * 6) / 8)  # weighted by samples
    assert merged["max_power_w"] == 800.0 and merged["min_sm_clock_mhz"] == 1000.0
    assert merged["throttled"] is True and merged["interval_s"] == 1.0 and merged["source"] == "nvidia-smi"
    assert [(g["index"], g["uuid"], g["samples"], g["throttled"]) for g in merged["gpus"]] == [
        (0, "GPU-a", 8, False), (1, "GPU-b", 8, True)]
    assert merged["gpus"][1]["mean_util_pct"] == 100.0
    assert merged["timeline"] == two["timeline"]
    assert [r["energy_j"] for r in merged["repeats"]] == [400.0, 4800.0]
    assert merge_summaries([one]) == one
    none = {"source": "none", "reason": NO_NVIDIA_SMI}
    assert merge_summaries([none, none]) == none
    assert merge_summaries([{"source": "off"}]) is None and merge_summaries([]) is None
    assert merge_summaries([{"source": "nvidia-smi", "samples": 0, "reason": "x"}, one]) == one


def test_energy_figures_per_joule_and_per_second_per_watt() -> None:
    block = {"source": "nvidia-smi", "samples": 10, "energy_j": 5500.0, "window_s": 11.0,
             "mean_power_w": 400.0}
    # the windows' 500 W (time-weighted) over the level's 10 s; the samples' mean 400 W
    assert energy_figures(block, output_tokens=20000, duration_s=10.0) == {
        "energy_j": 5000.0, "output_tokens_per_joule": 4.0, "output_tokens_per_s_per_w": 5.0}
    nothing = {"energy_j": None, "output_tokens_per_joule": None, "output_tokens_per_s_per_w": None}
    assert energy_figures(None, 100, 1.0) == nothing
    assert energy_figures({"source": "none", "reason": NO_NVIDIA_SMI}, 100, 1.0) == nothing
    assert energy_figures({**block, "energy_j": None, "mean_power_w": None}, 100, 1.0) == nothing
    assert energy_figures(block, 100, 0.0) == nothing


def test_the_plan_option() -> None:
    assert Bench().gpu_telemetry == 1.0
    assert Bench(gpu_telemetry="500ms").gpu_telemetry == 0.5  # type: ignore[arg-type]
    assert Bench(gpu_telemetry=None).gpu_telemetry is None
    with pytest.raises(ValueError, match="greater than 0"):
        Bench(gpu_telemetry=0)


# -- the sampler on a host ------------------------------------------------------------------


def _repeat_on(sampler: GpuSampler, seconds: float) -> list[Snapshot]:
    sampler.start(time.perf_counter_ns())
    time.sleep(seconds)
    sampler.stop()
    return sampler.snapshots()


def _stand_ins_running(bin_dir: Path) -> list[int]:
    """Pids of stand-ins started from `bin_dir` that still run (read from /proc, not killed)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and b"fake_nvidia_smi" in cmdline and b"-lms" in cmdline \
                and (proc / "environ").exists() and str(bin_dir).encode() in _environ(proc):
            pids.append(int(proc.name))
    return pids


def _environ(proc: Path) -> bytes:
    try:
        return (proc / "environ").read_bytes()
    except OSError:
        return b""


def _check_host_sampling(sampler: GpuSampler, interval: float) -> None:
    assert (sampler.block, sampler.repeat_keys) == ("gpu_telemetry", ("mean_power_w", "energy_j"))
    assert sampler.reason is None and len(sampler.listed) == 8
    first = _repeat_on(sampler, 1.6)
    assert isinstance(first[-1], WindowEnd) and first[-1].t_s == pytest.approx(1.6, abs=0.3)
    rounds = first[:-1]
    assert 8 <= len(rounds) <= 18, [s.t_s for s in rounds]
    assert rounds[0].t_s < 1.0
    steps = [b.t_s - a.t_s for a, b in pairwise(rounds)]
    assert sorted(steps)[len(steps) // 2] == pytest.approx(interval, abs=0.05)  # one round per interval
    summary = sampler.summarize(first)
    assert summary["source"] == "nvidia-smi" and summary["gpu_count"] == 8
    assert summary["gpus"][3]["uuid"] == fake.uuid(3) and summary["gpus"][3]["name"] == NAME
    assert summary["gpus"][7]["power_limit_w"] is None and summary["gpus"][7]["mean_mem_util_pct"] is None
    assert summary["max_power_w"] > 4000  # 8 GPUs at load (ramped in 0.3 s)
    assert summary["energy_j"] == pytest.approx(summary["mean_power_w"] * summary["window_s"], rel=0.15)
    assert summary["throttled_gpus"] == [fake.THROTTLING]
    assert summary["gpus"][fake.THROTTLING]["throttle_reasons"] == ["power", "temperature"]
    assert summary["gpus"][fake.THROTTLING]["min_sm_clock_mhz"] < 2000
    assert summary["max_temp_c"] >= 85 and summary["max_mem_used_mib"] > 90000
    # a second repeat: a new process (over SSH a new session too: its first sample came after
    # 0.5 s on a loaded machine), timed from its own origin, not from the first one's
    second = _repeat_on(sampler, 1.0)
    assert 2 <= len(second) - 1 <= 13 and second[0].t_s < 0.95
    level = sampler.merge([summary, sampler.summarize(second)])
    assert level is not None and level["samples"] == len(first) + len(second) - 2
    assert len(level["repeats"]) == 2


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    return install(tmp_path / "bin")


@pytest.mark.slow
def test_the_sampler_over_the_local_transport(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_RAMP_S", "0.3")
    transport = LocalTransport()
    sampler = GpuSampler(transport, 0.1)
    _check_host_sampling(sampler, 0.1)
    assert transport.round_trips == 3  # the probe, then one held command per repeat
    assert _stand_ins_running(bin_dir) == []  # each repeat's stop ended its nvidia-smi


@pytest.fixture(scope="module")
def gpu_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuSshServer]:
    root = tmp_path_factory.mktemp("gpu-sshd")
    with GpuSshServer(root / "sshd", install(root / "bin"), {"FAKE_NVIDIA_SMI_RAMP_S": "0.3"}) as server:
        yield server


@pytest.mark.slow
def test_the_sampler_over_ssh_with_the_stand_in_on_the_host_path(gpu_sshd: GpuSshServer) -> None:
    inventory = gpu_sshd.inventory(1)
    with connect("h1", inventory) as transport:
        mark = gpu_sshd.log_mark()  # the sampler's sessions (the ssh client's connect runs one)
        sampler = GpuSampler(transport, 0.1)
        _check_host_sampling(sampler, 0.1)
        assert gpu_sshd.round_trips(inventory, since=mark) == {"h1": 3}  # never one per sample
    assert _stand_ins_running(Path(gpu_sshd.env["PATH"].split(":")[0])) == []


def test_an_nvidia_smi_that_dies_during_a_repeat_is_said(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_LOST_AFTER", "2")
    sampler = GpuSampler(LocalTransport(), 0.1)
    snaps = _repeat_on(sampler, 0.8)
    end = snaps[-1]
    assert isinstance(end, WindowEnd) and end.values["exit_code"] == 15.0
    assert "GPU is lost" in end.problem
    summary = sampler.summarize(snaps)
    assert summary["samples"] == 2 and "GPU is lost" in summary["problem"]


def _without_nvidia_smi(transport: Transport) -> None:
    sampler = GpuSampler(transport, 1.0)
    assert sampler.reason == NO_NVIDIA_SMI
    snaps = _repeat_on(sampler, 0.05)
    assert snaps == []
    summary = sampler.summarize(snaps)
    assert summary == {"source": "none", "reason": "no nvidia-smi on the host"}
    assert sampler.merge([summary, summary]) == summary
    assert energy_figures(summary, 1000, 1.0)["output_tokens_per_joule"] is None


def test_a_host_without_nvidia_smi_records_none_and_nothing_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sshd: SshServer) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:/usr/bin:/bin")
    local = LocalTransport()
    _without_nvidia_smi(local)
    assert local.round_trips == 1  # asked once, never held
    with connect("h1", sshd.inventory(1)) as ssh:  # the shared sshd's host has none either
        _without_nvidia_smi(ssh)


def test_an_nvidia_smi_that_cannot_reach_the_driver_is_said(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_FAIL", "NVIDIA-SMI has failed because it couldn't communicate "
                                               "with the NVIDIA driver.")
    sampler = GpuSampler(LocalTransport(), 1.0)
    assert sampler.reason == ("nvidia-smi -L failed (exit 9): NVIDIA-SMI has failed because it "
                              "couldn't communicate with the NVIDIA driver.")
    assert sampler.summarize(_repeat_on(sampler, 0.01))["source"] == "none"


def test_telemetry_off_asks_nothing_and_fills_null() -> None:
    transport = LocalTransport()
    sampler = GpuSampler(transport, None)
    summary = sampler.summarize(_repeat_on(sampler, 0.01))
    assert transport.round_trips == 0
    assert sampler.merge([summary]) is None


# -- in a sweep ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_simulated_sweep_records_gpu_figures_per_level(
        tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_RAMP_S", "0.3")
    config = Bench.model_validate({"concurrency": [2], "duration": "1s", "repeats": 2, "warmup": 0,
                                   "max_tokens": 64, "gpu_telemetry": "200ms"})
    sampler = GpuSampler(LocalTransport(), config.gpu_telemetry)  # the one line of wiring
    out = tmp_path / "out"
    with running_simulator(profile="instant", startup_time_scale=0.001) as sim:
        run_sweep(config, base_url=sim.base_url, model=None, api_key=None, out_dir=out, samplers=[sampler])
    level = json.loads((out / "level-c2.json").read_text())
    block = level["gpu_telemetry"]
    assert block["source"] == "nvidia-smi" and block["gpu_count"] == 8
    assert block["samples"] >= 6 and len(block["repeats"]) == 2
    assert [g["samples"] for g in block["gpus"]] == [block["samples"]] * 8  # every round whole
    # each repeat's window runs from its origin to its stop: its requests' time and the
    # samplers' start and stop
    # (the samplers' start and stop: a second or so per repeat on a fully loaded machine)
    assert level["duration"] <= block["window_s"] <= level["duration"] + 1.25 * len(level["repeats"])
    assert [set(r) >= {"mean_power_w", "energy_j"} for r in level["repeats"]] == [True, True]
    figures = energy_figures(block, level["total_output_tokens"], level["duration"])
    # one quantity in two units: they differ only by how the power is averaged (time-weighted
    # or per sample: a ramp sampled unevenly on a loaded machine moves them apart by 12%)
    assert figures["output_tokens_per_joule"] == pytest.approx(figures["output_tokens_per_s_per_w"], rel=0.25)
    assert figures["output_tokens_per_joule"] > 0
