"""The GPUs and links the what-if model knows, keyed by the name nvidia-smi prints.

Figures are the vendors' datasheet values: memory (GB as nvidia-smi totals it, in GiB here),
memory bandwidth, dense (not sparse) tensor throughput per format, the board power limit and
NVLink's bandwidth per direction (0: none, the GPUs talk over PCIe). A format a GPU has no
unit for runs at the next wider one (FP4 on Hopper at its FP8 rate, FP8 on Ampere at bf16).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.whatif.errors import WhatIfUnknown

# PCIe bandwidth per lane per direction, GB/s (128b/130b encoding from gen 3 on).
PCIE_LANE_GBS: dict[int, float] = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@dataclass(frozen=True)
class GpuSpec:
    name: str  # as nvidia-smi --query-gpu=name prints it
    memory_gib: float
    bandwidth_gbs: float  # device memory, GB/s
    tflops: dict[str, float]  # dense tensor TFLOPS by format: fp4, fp8, bf16
    power_w: float
    nvlink_gbs: float = 0.0  # per direction per GPU; 0: no NVLink
    pcie_gen: int = 5
    pcie_lanes: int = 16

    def rate(self, dtype: str) -> float:
        """Dense TFLOPS of `dtype`'s matmuls (a missing format at the next wider one)."""
        for key in {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16")}.get(dtype, (dtype,)):
            if key in self.tflops:
                return self.tflops[key]
        return self.tflops["bf16"]


@dataclass(frozen=True)
class Links:
    """How the GPUs of a box talk: NVLink if any, else PCIe of that generation and width."""

    pcie_gen: int
    pcie_lanes: int
    nvlink_gbs: float = 0.0

    @property
    def kind(self) -> str:
        return "NVLink" if self.nvlink_gbs else f"PCIe gen{self.pcie_gen} x{self.pcie_lanes}"

    @property
    def bandwidth_gbs(self) -> float:
        """GB/s per direction per GPU of the links collectives run over."""
        return self.nvlink_gbs or PCIE_LANE_GBS[self.pcie_gen] * self.pcie_lanes


GPUS: dict[str, GpuSpec] = {g.name: g for g in (
    GpuSpec("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887 / 1024, 1792,
            {"fp4": 2000, "fp8": 1000, "bf16": 500}, 600),
    GpuSpec("NVIDIA H100 80GB HBM3", 81559 / 1024, 3350, {"fp8": 1979, "bf16": 989}, 700,
            nvlink_gbs=450),
    GpuSpec("NVIDIA H200", 143771 / 1024, 4800, {"fp8": 1979, "bf16": 989}, 700,
            nvlink_gbs=450),
    GpuSpec("NVIDIA B200", 183359 / 1024, 8000, {"fp4": 9000, "fp8": 4500, "bf16": 2250}, 1000,
            nvlink_gbs=900),
    GpuSpec("NVIDIA L40S", 46068 / 1024, 864, {"fp8": 733, "bf16": 362}, 350, pcie_gen=4),
    GpuSpec("NVIDIA A100-SXM4-80GB", 81920 / 1024, 2039, {"bf16": 312}, 400, nvlink_gbs=300,
            pcie_gen=4),
)}  # fmt: skip
DEFAULT_GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def gpu(name: str) -> GpuSpec:
    """The GPU called `name` (with or without "NVIDIA ", any case); WhatIfUnknown otherwise."""
    wanted = name.strip().lower().removeprefix("nvidia ").strip()
    for key, spec in GPUS.items():
        if key.lower().removeprefix("nvidia ") == wanted:
            return spec
    known = "; ".join(GPUS)
    raise WhatIfUnknown(f"unknown GPU {name!r} (the what-if model knows: {known})")


def links_of(spec: GpuSpec) -> Links:
    return Links(spec.pcie_gen, spec.pcie_lanes, spec.nvlink_gbs)
