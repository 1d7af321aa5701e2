"""The kernels vLLM chose and the environment of a run, end to end: `orch apply` of a
simulated deployment whose profile falls back to weight-only Marlin (the warning vLLM
prints) on a host with a stand-in `nvidia-smi`, then one without it; the apply warns of the
fallback, the run folders hold startup.json's kernels and environment/, `orch status` says
the kernels of the running server and `orch compare` puts both runs side by side."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port

pytestmark = pytest.mark.slow

SMI_Q = Path(__file__).parents[1] / "fixtures" / "nvidia-smi-q-2x-rtx-pro-6000.txt"
STAND_IN = f"""#!/bin/sh
case "$1" in
  -q) cat "{SMI_Q}";;
  --query-gpu=*) echo '0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 97887, 580.95.05, 12.0, 00000000:01:00.0'
                 echo '1, NVIDIA RTX PRO 6000 Blackwell Server Edition, 97887, 580.95.05, 12.0, 00000000:02:00.0';;
  --query-compute-apps=*) ;;
  topo) echo 'GPU0 X';;
esac
"""


@pytest.fixture()
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {"tmp": tmp_path, "port": free_port(),
                             "name": f"kern-{tmp_path.name[-10:]}"}
    yield state
    orch("stop", write(state, "kimi-k2.5-nvfp4-8x-rtx-pro-6000"), cwd=tmp_path)


def write(state: dict[str, Any], profile: str) -> Path:
    plan = {
        "name": profile.split("-8x")[0], "hosts": "localhost",
        "python": {"venv": str(state["tmp"] / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "nvidia/Kimi-K2.5-NVFP4", "host": "127.0.0.1",
                    "port": state["port"], "backend": "process", "name": state["name"],
                    "sim": {"profile": profile, "time_scale": 0.001, "startup_time_scale": 0.0005}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1], "requests_per_level": 2, "warmup": 0, "max_tokens": 16},
    }
    path = state["tmp"] / f"{profile}.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_kernels_and_environment_through_apply_status_and_compare(
        env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    smi = env["tmp"] / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(STAND_IN)
    smi.chmod(0o755)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{smi.parent}:{path}")
    fallback = orch("apply", write(env, "kimi-k2.5-nvfp4-marlin-fallback"), cwd=env["tmp"])
    assert fallback.returncode == 0, fallback.stdout + fallback.stderr
    said = " ".join(fallback.stdout.split())
    assert "startup ok kernels: attention TRITON_MLA; MoE MARLIN (NvFp4); NVFP4 GEMM " \
        "MARLIN; KV cache fp8; CUDA graphs PIECEWISE (67 sizes, 1..512)" in said, fallback.stdout
    assert "startup warning kernel fallback: FP4 weight-only Marlin: Your GPU does not have " \
        "native support for FP4 computation" in said
    assert "environment ok nvidia-smi -q kept (driver 580.95.05, CUDA 13.0); no vllm " \
        "collect-env: no vLLM in the venv" in said
    first = last_run(env["tmp"])
    host = first / "hosts" / "localhost"
    kernels = json.loads((host / "startup.json").read_text())["facts"]["kernels"]
    assert kernels["linear"] == {"NVFP4 GEMM": "MARLIN"}
    assert kernels["fallbacks"][0].startswith("FP4 weight-only Marlin: ")
    assert (host / "environment" / "nvidia-smi-q.txt").read_text() == SMI_Q.read_text()
    record = json.loads((host / "environment" / "environment.json").read_text())
    assert record["nvidia_smi"]["cuda_version"] == "13.0"

    status = orch("status", write(env, "kimi-k2.5-nvfp4-marlin-fallback"), cwd=env["tmp"])
    lines = status.stdout.splitlines()
    assert "localhost: kernels: attention TRITON_MLA; MoE MARLIN (NvFp4); NVFP4 GEMM MARLIN; " \
        "KV cache fp8; CUDA graphs PIECEWISE (67 sizes, 1..512)" in lines, status.stdout
    assert "localhost: kernel fallback: FP4 weight-only Marlin" in lines
    as_json = json.loads(orch("status", write(env, "kimi-k2.5-nvfp4-marlin-fallback"), "--json",
                              cwd=env["tmp"]).stdout)
    assert as_json[0]["kernels"]["attention"] == "TRITON_MLA"

    # A re-apply that changes nothing keeps that capture: copied on the controller, no
    # command on the host (a no-op stays a no-op), the run folder as complete as the first.
    again = orch("apply", write(env, "kimi-k2.5-nvfp4-marlin-fallback"), cwd=env["tmp"])
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"environment ok as in run {first.name}, its capture kept" in \
        " ".join(again.stdout.split()), again.stdout
    kept = last_run(env["tmp"]) / "hosts" / "localhost" / "environment"
    assert (kept / "nvidia-smi-q.txt").read_text() == SMI_Q.read_text()
    assert json.loads((kept / "environment.json").read_text())["kept_from"] == first.name

    # The same deployment with native FP4 kernels, on a host without nvidia-smi: the
    # environment says so, nothing fails.
    monkeypatch.setenv("PATH", path)
    native = orch("apply", write(env, "kimi-k2.5-nvfp4-8x-rtx-pro-6000"), cwd=env["tmp"])
    assert native.returncode == 0, native.stdout + native.stderr
    assert "no nvidia-smi -q: no nvidia-smi on the host's PATH" in " ".join(native.stdout.split())
    assert "kernel fallback" not in native.stdout
    second = last_run(env["tmp"])

    compared = orch("compare", first, second, cwd=env["tmp"])
    assert compared.returncode == 0, compared.stdout + compared.stderr
    text = " ".join(compared.stdout.split())
    assert "Kernels and environment" in text
    for expected in ("MARLIN (NvFp4)", "FLASHINFER_CUTLASS (NvFp4)", "FP4 weight-only Marlin",
                     "13.0", "2x NVIDIA RTX PRO 6000 Blackwell Server Edition"):
        assert expected in text, expected
    assert "warning: the MoE backend differs" in text
    assert "warning: the linear (GEMM) kernel choice differs" in text
    assert "vLLM fell back to a slower kernel at start-up (FP4 weight-only Marlin)" in text
