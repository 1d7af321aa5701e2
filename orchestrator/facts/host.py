"""The machine: OS, kernel, CPU, memory, Python, GPUs (gpus.py), systemd, user, clock.
Gathered whenever the request asks for `host` (every probe does)."""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import os
import platform
import re
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict

from orchestrator.facts.common import read_text
from orchestrator.facts.fact import Fact, as_float, as_int, as_str
from orchestrator.facts.gpus import Gpu, GpuApp, gpu_facts, parse_gpu_app_list, parse_gpus

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def parse_os_release(text: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def parse_meminfo(text: str) -> Dict[str, int]:
    """/proc/meminfo -> name: bytes."""
    out: Dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"(\w+(?:\(\w+\))?):\s+(\d+) kB", line)
        if match:
            out[match.group(1)] = int(match.group(2)) * 1024
    return out


def parse_cpu_model(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def host_facts() -> Dict[str, Any]:
    os_release = parse_os_release(read_text("/etc/os-release") or "")
    meminfo = parse_meminfo(read_text("/proc/meminfo") or "")
    uname = os.uname()
    return {
        # uname(2), as socket.gethostname() and platform.release() read it, without their
        # imports (platform: only when os-release says nothing)
        "hostname": uname.nodename,
        "os": os_release.get("PRETTY_NAME") or platform.platform(),
        "kernel": uname.release,
        "arch": uname.machine,
        "python": ".".join(map(str, sys.version_info[:3])),
        "python_path": sys.executable,
        "cpu_count": os.cpu_count(),
        "cpu_model": parse_cpu_model(read_text("/proc/cpuinfo") or ""),
        "memory_bytes": meminfo.get("MemTotal"),
        "memory_available_bytes": meminfo.get("MemAvailable"),
        **gpu_facts(),  # gpus, gpu_apps, topology
        "systemd": os.path.isdir("/run/systemd/system"),
        "user": os.environ.get("USER") or str(os.getuid()),
        "home": os.path.expanduser("~"),
        "time": time.time(),
    }


def gather_host(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    if request.get("host"):
        answer["host"] = host_facts()


# == controller side ==


@dataclass(frozen=True)
class HostFacts:
    """The machine: OS, Python, CPU, memory, GPUs (None without nvidia-smi), systemd, user."""

    hostname: str = ""
    os: str = ""
    kernel: str = ""
    arch: str = ""
    python: str = ""
    python_path: str = ""
    cpu_count: int | None = None
    cpu_model: str = ""
    memory_bytes: int | None = None
    memory_available_bytes: int | None = None
    gpus: tuple[Gpu, ...] | None = None
    gpu_apps: tuple[GpuApp, ...] | None = None  # who holds GPU memory (None: no nvidia-smi)
    topology: str | None = None
    systemd: bool = False
    user: str = ""
    home: str = ""
    time: float | None = None

    @property
    def is_root(self) -> bool:
        return self.user in ("root", "0")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostFacts:
        return cls(
            hostname=as_str(data.get("hostname")) or "", os=as_str(data.get("os")) or "",
            kernel=as_str(data.get("kernel")) or "", arch=as_str(data.get("arch")) or "",
            python=as_str(data.get("python")) or "", python_path=as_str(data.get("python_path")) or "",
            cpu_count=as_int(data.get("cpu_count")), cpu_model=as_str(data.get("cpu_model")) or "",
            memory_bytes=as_int(data.get("memory_bytes")),
            memory_available_bytes=as_int(data.get("memory_available_bytes")),
            gpus=parse_gpus(data), gpu_apps=parse_gpu_app_list(data),
            topology=as_str(data.get("topology")), systemd=bool(data.get("systemd")),
            user=str(data.get("user") or ""), home=as_str(data.get("home")) or "",
            time=as_float(data.get("time")),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    return {"host": HostFacts.from_json(answer.get("host") or {})}


FACT = Fact(gather="gather_host", parse=parse)
