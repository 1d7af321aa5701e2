"""The simulator's stand-in DCGM exporter: the `/metrics` text of NVIDIA's dcgm-exporter for
the profile's GPUs, served at STAND_IN_DCGM_PATH on the simulator's own port.

The format is the exporter's: `# HELP` and `# TYPE` lines per field, then one line per GPU
labelled gpu, UUID, pci_bus_id, device, modelName, Hostname and DCGM_FI_DRIVER_VERSION. The
fields are the default counters (default-counters.csv) with the power limit, plus the
profiling (DCP) fields of dcp-metrics-included.csv: SM and DRAM activity (ratios 0-1), PCIe
and NVLink bytes per second (gauges). Every GPU of the TP group reads alike (sim/gpus.py);
the RTX PRO 6000 profiles have no NVLink, so its rates are 0 as a GPU without links reports.
"""

from __future__ import annotations

import socket

from orchestrator.sim.gpus import Reading

STAND_IN_DCGM_PATH = "/stand-in/dcgm/metrics"
DRIVER_VERSION = "580.95.05"

# field -> (type, help text), in the exporter's order
FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("gauge", "Power management limit (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "Ratio of cycles the device memory interface is active "
                                          "sending or receiving data."),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gauge", "The rate of data transmitted over the PCIe bus - "
                                            "including both protocol headers and data payloads - "
                                            "in bytes per second."),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "The rate of data received over the PCIe bus - "
                                            "including both protocol headers and data payloads - "
                                            "in bytes per second."),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("gauge", "The rate of data transmitted over NVLink, not "
                                              "including protocol headers, in bytes per second."),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("gauge", "The rate of data received over NVLink, not "
                                              "including protocol headers, in bytes per second."),
}  # fmt: skip


def uuid(index: int) -> str:
    return f"GPU-5e1a0c37-0b2d-4f6e-8a91-7c3d2e1b4a{index:02d}"


def _values(r: Reading) -> dict[str, str]:
    return {
        "DCGM_FI_DEV_SM_CLOCK": str(r.sm_clock_mhz),
        "DCGM_FI_DEV_GPU_TEMP": str(round(r.temp_c)),
        "DCGM_FI_DEV_POWER_USAGE": f"{r.power_w:.3f}",
        "DCGM_FI_DEV_POWER_MGMT_LIMIT": f"{r.power_limit_w:.3f}",
        "DCGM_FI_DEV_GPU_UTIL": str(round(100 * r.util)),
        "DCGM_FI_DEV_MEM_COPY_UTIL": str(round(100 * r.dram_active)),
        "DCGM_FI_DEV_FB_FREE": str(r.mem_total_mib - r.mem_used_mib),
        "DCGM_FI_DEV_FB_USED": str(r.mem_used_mib),
        "DCGM_FI_PROF_SM_ACTIVE": f"{r.sm_active:.6f}",
        "DCGM_FI_PROF_DRAM_ACTIVE": f"{r.dram_active:.6f}",
        "DCGM_FI_PROF_PCIE_TX_BYTES": str(round(r.pcie_tx_bytes_s)),
        "DCGM_FI_PROF_PCIE_RX_BYTES": str(round(r.pcie_rx_bytes_s)),
        "DCGM_FI_PROF_NVLINK_TX_BYTES": "0",
        "DCGM_FI_PROF_NVLINK_RX_BYTES": "0",
    }


def render(reading: Reading, gpus: int, model_name: str, hostname: str | None = None) -> str:
    """The exporter's page for `gpus` GPUs that all read `reading`."""
    host = hostname or socket.gethostname()
    values = _values(reading)
    lines: list[str] = []
    for name, (kind, help_text) in FIELDS.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for index in range(gpus):
            labels = (f'gpu="{index}",UUID="{uuid(index)}",pci_bus_id="00000000:{0x17 + 0x10 * index:02X}:00.0",'
                      f'device="nvidia{index}",modelName="{model_name}",Hostname="{host}",'
                      f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"')
            lines.append(f"{name}{{{labels}}} {values[name]}")
    return "\n".join(lines) + "\n"
