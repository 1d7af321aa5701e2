"""GPUs: what nvidia-smi lists, who holds GPU memory, the topology. Part of the host fact
(the answer's `host` block; None throughout on a host without nvidia-smi)."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from orchestrator.facts.common import read_text, run_tool
from orchestrator.facts.fact import as_int
from orchestrator.facts.processes import process_group

# == host side: shipped to the host (stdlib only, Python 3.8) ==

NVIDIA_SMI_QUERY = "index,name,memory.total,driver_version,compute_cap,pci.bus_id"


def parse_nvidia_smi(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=NVIDIA_SMI_QUERY --format=csv,noheader,nounits` -> GPUs."""
    gpus: List[Dict[str, Any]] = []
    for row in text.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        try:
            memory: Optional[int] = int(float(cells[2]))
        except ValueError:
            memory = None  # "[N/A]"
        gpus.append({"index": int(cells[0]), "name": cells[1], "memory_mib": memory,
                     "driver": cells[3], "compute_cap": cells[4], "pci_bus_id": cells[5]})
    return gpus


GPU_APPS_QUERY = "pid,gpu_bus_id,used_memory"


def parse_gpu_apps(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-compute-apps=GPU_APPS_QUERY --format=csv,noheader,nounits` ->
    the processes holding GPU memory (pid, the GPU's bus id, MiB)."""
    apps: List[Dict[str, Any]] = []
    for row in text.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        try:
            used: Optional[int] = int(float(cells[2]))
        except ValueError:
            used = None  # "[N/A]"
        apps.append({"pid": int(cells[0]), "bus_id": cells[1], "used_mib": used})
    return apps


def gpu_apps() -> List[Dict[str, Any]]:
    """Who holds GPU memory, with each process's group: the service's own group is not in
    the way of its restart; anything else is (a leftover engine holds the memory)."""
    out = run_tool(["nvidia-smi", f"--query-compute-apps={GPU_APPS_QUERY}",
                    "--format=csv,noheader,nounits"])
    apps = parse_gpu_apps(out or "")
    for app in apps:
        stat = read_text(f"/proc/{app['pid']}/stat")
        try:
            app["pgid"] = process_group(stat) if stat else None
        except (IndexError, ValueError):
            app["pgid"] = None
        app["cmdline"] = [c for c in (read_text(f"/proc/{app['pid']}/cmdline") or "").split("\0") if c]
    return apps


def gpu_facts() -> Dict[str, Any]:
    """The host block's `gpus`, `gpu_apps` and `topology` (None without nvidia-smi)."""
    smi = run_tool(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"])
    gpus = parse_nvidia_smi(smi) if smi is not None else None
    topo = run_tool(["nvidia-smi", "topo", "-m"]) if gpus else None
    apps = gpu_apps() if gpus else None
    return {"gpus": gpus, "gpu_apps": apps, "topology": topo}


# == controller side ==


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int | None = None
    driver: str | None = None
    compute_cap: str | None = None
    pci_bus_id: str | None = None


@dataclass(frozen=True)
class GpuApp:
    """A process holding GPU memory (nvidia-smi's compute apps), with its process group."""

    pid: int
    bus_id: str = ""
    used_mib: int | None = None
    pgid: int | None = None
    cmdline: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuApp:
        return cls(pid=as_int(data.get("pid")) or 0, bus_id=str(data.get("bus_id") or ""),
                   used_mib=as_int(data.get("used_mib")), pgid=as_int(data.get("pgid")),
                   cmdline=tuple(str(c) for c in data.get("cmdline") or ()))


def parse_gpus(data: dict[str, Any]) -> tuple[Gpu, ...] | None:
    gpus = data.get("gpus")
    return tuple(Gpu(**g) for g in gpus) if isinstance(gpus, list) else None


def parse_gpu_app_list(data: dict[str, Any]) -> tuple[GpuApp, ...] | None:
    apps = data.get("gpu_apps")
    if not isinstance(apps, list):
        return None
    return tuple(GpuApp.from_json(a) for a in apps if isinstance(a, dict))
