"""The plan and inventory `orch init` writes, as data, then as commented YAML.

Pure: an `InitSpec` in, text out. No value is formatted into YAML text: the documents are built
as data and written by commented_yaml.py.
"""

from __future__ import annotations

from typing import Any

from orchestrator.init.commented_yaml import to_yaml
from orchestrator.init.comments import inventory_notes, plan_notes
from orchestrator.init.spec import InitSpec

SIM_PROFILE = "kimi-k2.5-nvfp4-8x-rtx-pro-6000"  # the simulator's profile of SIM_MODEL
SERVICE_PORT = 8000

_SMOKE: list[dict[str, Any]] = [
    {
        "name": "answer",
        "prompt": "Why is the sky blue? Answer in two or three sentences.",
        "max_tokens": 1024,
        "expect": {"content_regex": "(?i)scatter"},
    },
    {
        "name": "code",
        "prompt": "Write a Python function named add(a, b) that returns the sum of a and b. "
                  "Answer with one ```python code block.",
        "max_tokens": 2048,
        "expect": {"python_function": {"name": "add", "calls": [
            {"args": [2, 3], "returns": 5}, {"args": [-4, 4], "returns": 0}]}},
    },
]

_BENCH_PROMPT = ("Write a detailed step-by-step guide to planting, growing and harvesting a "
                 "vegetable garden, from preparing the soil to storing the harvest.")


def plan_data(spec: InitSpec) -> dict[str, Any]:
    """The plan `orch init` writes, as data (`render_plan` adds the comments)."""
    version = "${vars.vllm_version}"
    if spec.sim:
        python = {"venv": f"${{controller.home}}/.cache/orch/sim/venv-{version}",
                  "interpreter": "python3", "installer": "pip"}
        install: dict[str, Any] = {"packages": []}
        what = "the orch simulator"
    else:
        python = {"venv": f"/opt/venvs/vllm-{version}", "interpreter": "python3.12",
                  "installer": "uv"}
        install = {"packages": [f"vllm=={version}"], "clean": True, "torch_backend": "auto"}
        what = f"vLLM {spec.vllm_version}"
    data: dict[str, Any] = {
        "name": spec.name,
        "description": f"{spec.model} on {spec.host} ({what}, TP{spec.tensor_parallel_size})",
        "hosts": spec.host,
        "vars": {"vllm_version": spec.vllm_version},
        "python": python,
        "install": install,
    }
    if not spec.sim:
        data["env"] = None  # only comments: the HF_TOKEN line to uncomment
    service: dict[str, Any] = {"engine": "sim" if spec.sim else "vllm", "model": spec.model}
    if spec.served_model_name is not None:
        service["served_model_name"] = spec.served_model_name
    if spec.sim:
        service["backend"] = "process"
        if spec.local:
            service["host"] = "127.0.0.1"
    service["port"] = SERVICE_PORT
    service["args"] = {"tensor-parallel-size": spec.tensor_parallel_size}
    if spec.sim:
        service["sim"] = {"profile": SIM_PROFILE, "time_scale": 0.1, "startup_time_scale": 0.03,
                          "vllm_version": version}
    data["service"] = service
    data["health"] = ({"startup_timeout": "5m", "poll_interval": "0.5s"} if spec.sim else
                      {"startup_timeout": "30m", "poll_interval": "5s", "request_timeout": "60s"})
    data["smoke"] = [dict(check) for check in _SMOKE]
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256] if spec.sim else [1, 2, 4, 8, 16, 32, 48, 64, 96, 128]
    data["bench"] = {"endpoint": "chat", "prompt": _BENCH_PROMPT, "max_tokens": 1024,
                     "mode": "batch", "concurrency": levels, "requests_per_level": "1x",
                     "warmup": 1}
    if not spec.sim:
        data["collect"] = [{"path": "/etc/os-release"}, {"path": "/proc/driver/nvidia/version"}]
    return data


def inventory_data(spec: InitSpec) -> dict[str, Any]:
    target = spec.target
    if target.address is None:
        return {"hosts": {spec.host: {"connection": "local"}}}
    host: dict[str, Any] = {"address": target.address}
    if target.port is not None:
        host["port"] = target.port
    if target.user is not None:
        host["user"] = target.user
    if spec.identity_file is not None:
        host["identity_file"] = spec.identity_file
    if spec.jump is not None:
        host["jump"] = spec.jump
    host["vars"] = {"gpus": spec.tensor_parallel_size}
    return {"hosts": {spec.host: host},
            "ssh": {"known_hosts": "~/.ssh/known_hosts", "config": "~/.ssh/config"}}


def render_plan(spec: InitSpec) -> str:
    return to_yaml(plan_data(spec), plan_notes(spec))


def render_inventory(spec: InitSpec) -> str:
    return to_yaml(inventory_data(spec), inventory_notes(spec))
