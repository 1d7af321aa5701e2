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
from fixtures.sshd import free_port

from orchestrator.bench.dcgm import DcgmSampler, answers, parse_dcgm

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
