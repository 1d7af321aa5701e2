"""An apply on a GPU host samples its GPUs during every level: over a real sshd whose
sessions find the stand-in nvidia-smi (8 GPUs, power that moves), with the simulator as the
server. Each level records its `gpu_telemetry` and its energy; the sweep's table, sweep.csv
and `orch compare` show tokens per joule. A host without nvidia-smi says so and nothing
fails (the other e2e applies run on such hosts)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.gpu import GpuSshServer, install
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.ports import free_port
from fixtures.sshd import SshServer

pytestmark = pytest.mark.slow


# A profile without GPUs: the simulator then stands in for none (no DCGM stand-in), as on
# a host whose GPUs it does not simulate; the GPU profiles' stand-in is test_sim_limiters.py's.
NO_GPUS = "tiny-qwen2-vllm-cpu-2-cores"


def _plan(tmp_path: Path, name: str, telemetry: str | None, profile: str = "kimi-k2.5-nvfp4-8x-rtx-pro-6000",
          **bench: object) -> Path:
    plan = tmp_path / f"{name}.yaml"
    plan.write_text(yaml.safe_dump({
        "name": name, "hosts": "all",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "name": f"energy-{tmp_path.name[-8:]}",
                    "sim": {"profile": profile, "time_scale": 0.1,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 4], "requests_per_level": 8, "warmup": 0, "max_tokens": 64,
                  "ignore_eos": True, "gpu_telemetry": telemetry, **bench},
    }))
    return plan


def test_every_level_records_what_the_gpus_drew(tmp_path: Path) -> None:
    bin_dir = install(tmp_path / "bin")
    with GpuSshServer(tmp_path / "sshd", bin_dir, {"FAKE_NVIDIA_SMI_RAMP_S": "0.3"}) as sshd:
        inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
        plan = _plan(tmp_path, "energy", "0.2s")
        try:
            applied = orch("apply", plan, "-i", inventory, cwd=tmp_path)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            assert "tok/J" in applied.stdout and "GPU W" in applied.stdout
            run = last_run(tmp_path)
            bench = run / "hosts" / "h1" / "bench"
            for label in ("c1", "c4"):
                level = json.loads((bench / f"level-{label}.json").read_text())
                gpu = level["gpu_telemetry"]
                assert gpu["source"] == "nvidia-smi" and gpu["gpu_count"] == 8, gpu
                # a short level on a loaded machine may get one round of nvidia-smi's loop
                # (it starts with each repeat); one reading still makes energy
                assert gpu["samples"] >= 1 and gpu["energy_j"] > 0 and gpu["timeline"]
                assert level["output_tokens_per_joule"] > 0
                assert level["output_tokens_per_s_per_w"] > 0
                # model time: a rate per joule moves as a throughput does
                assert level["normalized"]["output_tokens_per_joule"] == pytest.approx(
                    level["output_tokens_per_joule"] * 0.1)
            (row, _) = csv.DictReader((bench / "sweep.csv").read_text().splitlines())
            assert float(row["output_tokens_per_joule"]) > 0
            compared = orch("compare", run, cwd=tmp_path)
            assert compared.returncode == 0, compared.stdout + compared.stderr
            said = " ".join(compared.stdout.split())
            assert "Energy by load" in said and "tok/J" in said and "Best: " in said
        finally:
            orch("stop", plan, "-i", inventory, cwd=tmp_path)


def test_a_host_without_nvidia_smi_records_none_and_runs(tmp_path: Path, sshd: SshServer) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    plan = _plan(tmp_path, "no-gpu", "1s", NO_GPUS)
    try:
        applied = orch("apply", plan, "-i", inventory, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        level = json.loads((last_run(tmp_path) / "hosts/h1/bench/level-c1.json").read_text())
        assert level["gpu_telemetry"] == {"source": "none", "reason": "no nvidia-smi on the host"}
        assert "output_tokens_per_joule" not in level or level["output_tokens_per_joule"] is None
        assert "tok/J" not in applied.stdout
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path)


def test_a_host_with_a_dcgm_exporter_and_no_nvidia_smi_is_read_through_it(
        tmp_path: Path, sshd: SshServer) -> None:
    port = free_port()  # the exporter listens on the host (loopback); orch forwards to it
    exporter = Path(__file__).parents[1] / "fixtures" / "fake_dcgm_exporter.py"
    with subprocess.Popen([sys.executable, str(exporter), str(port)], stdout=subprocess.PIPE,
                          text=True) as served:
        assert served.stdout is not None and served.stdout.readline().strip() == "ready"
        inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
        plan = _plan(tmp_path, "dcgm", "0.2s", NO_GPUS, dcgm_port=port)
        try:
            applied = orch("apply", plan, "-i", inventory, cwd=tmp_path)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            level = json.loads((last_run(tmp_path) / "hosts/h1/bench/level-c4.json").read_text())
            gpu = level["gpu_telemetry"]
            assert gpu["source"] == "dcgm-exporter" and gpu["gpu_count"] == 2, gpu
            assert level["output_tokens_per_joule"] > 0
        finally:
            orch("stop", plan, "-i", inventory, cwd=tmp_path)
            served.terminate()
