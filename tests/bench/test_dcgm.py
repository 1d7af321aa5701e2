"""GPU telemetry from a DCGM exporter (bench/dcgm.py): its text format parsed per GPU, and
the sampler against a stand-in exporter (tests/fixtures/fake_dcgm_exporter.py, a real HTTP
server in a subprocess) filling the same `gpu_telemetry` block as the nvidia-smi sampler."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.ports import free_port

from orchestrator.bench.dcgm import DcgmSampler, answers, parse_dcgm
from orchestrator.bench.gpu_figures import summarize_samples
from orchestrator.bench.samplers import Snapshot
from orchestrator.limits.evidence import NVLINK, PCIE_RX, PCIE_TX, SM_ACTIVE

EXPORTER = Path(__file__).parents[1] / "fixtures" / "fake_dcgm_exporter.py"
PAGE = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aa",pci_bus_id="0000:17:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="h"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-bb",pci_bus_id="0000:31:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="h"} 1755
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3"} 612.25
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3"} 598.5
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aa"} 75000
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aa"} 5000
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aa"} 0
DCGM_FI_DEV_GPU_TEMP{UUID="GPU-cc"} 50
garbage line
"""


def test_the_exporters_lines_are_read_per_gpu() -> None:
    values, gpus = parse_dcgm(PAGE.splitlines())
    assert values == {"gpu0.sm_clock_mhz": 1980.0, "gpu1.sm_clock_mhz": 1755.0,
                      "gpu0.power_w": 612.25, "gpu1.power_w": 598.5,
                      "gpu0.mem_used_mib": 75000.0, "gpu0.mem_total_mib": 80000.0}
    assert gpus == {0: ("GPU-aa", "NVIDIA H100 80GB HBM3"), 1: ("GPU-bb", "NVIDIA H100 80GB HBM3")}


# dcp-metrics-included.csv's profiling fields: ratios, and bytes per second as gauges
PROFILING_PAGE = """\
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="H100"}} {sm0}
DCGM_FI_PROF_SM_ACTIVE{{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="H100"}} 0.9
DCGM_FI_PROF_PCIE_RX_BYTES{{gpu="0",UUID="GPU-aa"}} 3500000000
DCGM_FI_PROF_PCIE_TX_BYTES{{gpu="0",UUID="GPU-aa"}} 2500000000
DCGM_FI_PROF_NVLINK_RX_BYTES{{gpu="1",UUID="GPU-bb"}} 40000000000
DCGM_FI_PROF_NVLINK_TX_BYTES{{gpu="1",UUID="GPU-bb"}} 30000000000
DCGM_FI_PROF_DRAM_ACTIVE{{gpu="0",UUID="GPU-aa"}} 0.25
DCGM_FI_PROF_DRAM_ACTIVE{{gpu="1",UUID="GPU-bb"}} 0.75
DCGM_FI_DEV_MEM_COPY_UTIL{{gpu="1",UUID="GPU-bb"}} 61
"""


def test_the_profiling_fields_are_read_in_the_limiters_units() -> None:
    values, _ = parse_dcgm(PROFILING_PAGE.format(sm0=0.3).splitlines())
    assert values == {
        "gpu0.sm_active": 0.3, "gpu1.sm_active": 0.9,
        "gpu0.pcie_rx_mb_s": 3500.0, "gpu0.pcie_tx_mb_s": 2500.0,  # MB = 1e6 bytes, per second
        "gpu1.nvlink_mb_s": 70000.0,  # both directions
        "gpu0.mem_util_pct": 25.0,  # DRAM_ACTIVE stands in where MEM_COPY_UTIL is missing
        "gpu1.mem_util_pct": 61.0,  # and not where it is there
    }


def test_the_summary_has_them_per_gpu_and_over_all_gpus_under_the_limiters_keys() -> None:
    snapshots = [Snapshot(t, parse_dcgm(PROFILING_PAGE.format(sm0=sm).splitlines())[0])
                 for t, sm in ((0.0, 0.2), (1.0, 0.4))]
    block = summarize_samples(snapshots, interval_s=1.0)
    gpu0, gpu1 = block["gpus"]
    assert (gpu0[f"mean_{SM_ACTIVE}"], gpu1[f"mean_{SM_ACTIVE}"]) == (0.3, 0.9)
    assert (gpu0[f"mean_{PCIE_RX}"], gpu0[f"mean_{PCIE_TX}"]) == (3500.0, 2500.0)
    assert f"mean_{PCIE_RX}" not in gpu1 and f"mean_{NVLINK}" not in gpu0  # absent stays absent
    assert block[f"mean_{SM_ACTIVE}"] == 0.6  # the mean over the GPUs that have it
    assert (block[f"mean_{PCIE_RX}"], block[f"mean_{NVLINK}"]) == (3500.0, 70000.0)


def test_an_exporter_without_them_and_nvidia_smi_leave_them_out() -> None:
    values, gpus = parse_dcgm(PAGE.splitlines())
    block = summarize_samples([Snapshot(0.0, values)], gpus, interval_s=1.0)
    keys = {*block, *(k for g in block["gpus"] for k in g)}
    assert not {k for k in keys if k.endswith((SM_ACTIVE, PCIE_RX, PCIE_TX, NVLINK))}


@pytest.fixture(scope="module")
def exporter() -> Iterator[str]:
    port = free_port()
    with subprocess.Popen([sys.executable, str(EXPORTER), str(port)], stdout=subprocess.PIPE,
                          text=True) as process:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        try:
            yield f"http://127.0.0.1:{port}/metrics"
        finally:
            process.terminate()


@pytest.mark.slow
def test_the_sampler_fills_the_gpu_telemetry_block(exporter: str) -> None:
    assert answers(exporter) and not answers(exporter.replace("/metrics", "/nothing"))
    sampler = DcgmSampler(exporter, 0.1)
    sampler.start(time.perf_counter_ns())
    time.sleep(0.8)
    sampler.stop()
    block = sampler.merge([sampler.summarize(sampler.snapshots())])
    assert block is not None and block["source"] == "dcgm-exporter"
    assert block["gpu_count"] == 2 and block["samples"] >= 4
    # the stand-in ramps for 0.5 s from its start: a late (loaded) repeat sees it flat
    assert block["energy_j"] > 0 and block["max_power_w"] >= block["mean_power_w"] > 0
    assert [g["name"] for g in block["gpus"]] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 2
    figures = sampler.level_figures(block, {"total_output_tokens": 4000, "duration": 0.8})
    assert figures["output_tokens_per_joule"] is not None and figures["output_tokens_per_joule"] > 0


def test_an_exporter_that_is_not_there_is_not_taken_for_one() -> None:
    assert not answers(f"http://127.0.0.1:{free_port()}/metrics")
