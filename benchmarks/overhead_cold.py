"""The cold-apply table of benchmarks/apply_overhead.py (`--cold`): one host, a plan with
`python.installer: uv` that makes a new venv, installs uv into it and 2 pins with it (every
wheel already on disk: find_links, no index), writes 2 files and runs one command; the venv,
the files and the command's mark are removed before each run. Goal: under 2 s. The step
times come from the run folder's steps.json (the install and python steps are one converge:
the venv, uv, then the pins).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from fixtures.realpkgs import UV
from fixtures.sshd import SshServers

GOAL_S = 2.0
Orch = Callable[[list[str], Path], tuple[float, subprocess.CompletedProcess[str]]]


def uv_wheel(folder: Path) -> Path:
    """The wheel of the uv this checkout runs (the package index's, cached by pip): the
    venv's installer, put into it from find_links as a host without an index would."""
    version = subprocess.run([str(UV), "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    found = list(folder.glob(f"uv-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "-d", str(folder), f"uv=={version}"], check=True)
        found = list(folder.glob(f"uv-{version}-*.whl"))
    return found[0]


def cold_plan(work: Path, wheels: Path, uv_folder: Path) -> Path:
    plan = {
        "name": "cold",
        "hosts": "all",
        "python": {"venv": str(work / "cold-venv"), "interpreter": "python3", "installer": "uv"},
        "install": {"packages": ["orchbench-p0==1.0.0", "orchbench-p1==1.0.1"],
                    "find_links": [str(wheels), str(uv_folder)], "no_index": True},
        "files": [{"path": str(work / "cold-etc" / f"c{i}.conf"), "content": f"c = {i}\n"}
                  for i in range(2)],
        "commands": [{"name": "mark", "shell": f"touch {work / 'cold-mark'}",
                      "creates": str(work / "cold-mark")}],
    }
    path = work / "plan-cold.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _reset(work: Path) -> None:
    for path in (work / "cold-venv", work / "cold-etc"):
        shutil.rmtree(path, ignore_errors=True)
    (work / "cold-mark").unlink(missing_ok=True)


def measure_cold(servers: SshServers, work: Path, wheels: Path, repeats: int,
                 orch: Orch) -> list[tuple[str, float, float, dict[str, float]]]:
    """[(transport, median s, best s, median s per step)] of cold applies to one host."""
    uv_folder = work / "uv-wheel"
    uv_folder.mkdir(exist_ok=True)
    uv_wheel(uv_folder)
    plan = cold_plan(work, wheels, uv_folder)
    rows = []
    for transport in ("paramiko", "openssh"):
        inventory = servers.inventory(1)
        inventory = inventory.model_copy(
            update={"ssh": inventory.ssh.model_copy(update={"transport": transport})})
        inv_file = work / f"inventory-cold-{transport}.yaml"
        inv_file.write_text(yaml.safe_dump(inventory.model_dump(mode="json")))
        times: list[float] = []
        steps: dict[str, list[float]] = {}
        for _ in range(repeats):
            _reset(work)
            seconds, result = orch(["apply", str(plan), "-i", str(inv_file)], work)
            if result.returncode != 0:
                raise SystemExit(result.stdout + result.stderr)
            times.append(seconds)
            run = sorted((work / "runs" / "cold").iterdir(), key=lambda p: p.name)[-1]
            for step in json.loads((run / "hosts" / "h1" / "steps.json").read_text())["steps"]:
                steps.setdefault(step["step"], []).append(step["seconds"])
        rows.append((transport, statistics.median(times), min(times),
                     {name: statistics.median(values) for name, values in steps.items()}))
    return rows


def print_cold(rows: list[tuple[str, float, float, dict[str, float]]], repeats: int) -> None:
    print(f"cold apply, python.installer: uv (new venv, uv, 2 pins, 2 files, 1 command; "
          f"wheels on disk), 1 host, {repeats} runs")
    print(f"{'transport':<10} | {'median s':>8} | {'best s':>6} | {'steps (median s)':<60} | goal")
    print("-" * 100)
    for transport, median, best, steps in rows:
        shown = ", ".join(f"{name} {seconds:.2f}" for name, seconds in steps.items())
        ok = "met" if median < GOAL_S else "missed"
        print(f"{transport:<10} | {median:>8.3f} | {best:>6.3f} | {shown:<60} | "
              f"< {GOAL_S} s: {ok}")
