"""`nvidia-smi topo -m` read into a typed `Topology`, and the plan's layout checked against it
(pure: text in, values out).

The matrix names every pair of devices by the path between them, fastest first:

    NV#   a bonded set of # NVLinks (more links, more bandwidth)
    PIX   at most one PCIe bridge          PXB  several PCIe bridges, no host bridge
    PHB   a PCIe host bridge (the CPU)     NODE between host bridges within a NUMA node
    SYS   across the SMP interconnect between NUMA nodes (QPI/UPI: another socket)

Older drivers wrote SOC for SYS. Rows and columns of NICs (`NIC0`, or `mlx5_0` on old drivers)
are kept apart from the GPUs' (`nic_links`, `nic_names` from the "NIC Legend"). The trailing
columns differ by driver: `CPU Affinity`, then `NUMA Affinity`, then (newer drivers) `GPU NUMA
ID`; a column a driver does not write is None.

`layout_links`: vLLM gives ranks to the visible GPUs in order (CUDA_VISIBLE_DEVICES), tensor
parallel innermost: TP group g is ranks g*TP .. g*TP+TP-1, pipeline stages and data-parallel
replicas the next groups. Each TP group's slowest link is what its all-reduce runs at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.engines.layout import Layout

# Slowest last; NV# ranks above all PCIe paths (by its link count among NVLinks).
PCIE_KINDS = ("PIX", "PXB", "PHB", "NODE", "SYS")
HOST_BRIDGE = ("PHB", "NODE")
TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")

_NVLINK = re.compile(r"^NV(\d+)$")
_GPU = re.compile(r"^GPU(\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


class TopologyError(ValueError):
    """The text holds no `nvidia-smi topo -m` matrix."""


@dataclass(frozen=True)
class Link:
    """The path between two devices as the matrix spells it (`NV18`, `PHB`, `X`, ...)."""

    text: str

    @property
    def kind(self) -> str:
        """`NV`, one of PCIE_KINDS, `X` (self), or `?` for a cell orch does not know."""
        if _NVLINK.match(self.text):
            return "NV"
        text = "SYS" if self.text == "SOC" else self.text
        return text if text in (*PCIE_KINDS, "X") else "?"

    @property
    def nvlinks(self) -> int:
        match = _NVLINK.match(self.text)
        return int(match.group(1)) if match else 0

    @property
    def is_nvlink(self) -> bool:
        return self.kind == "NV"

    @property
    def slowness(self) -> float:
        """Orders links fastest (lowest) to slowest: NV# by fewer links, then PCIe kinds."""
        if self.kind == "NV":
            return -self.nvlinks / 1000
        if self.kind in PCIE_KINDS:
            return 1 + PCIE_KINDS.index(self.kind)
        return 0.0 if self.kind == "X" else 10.0


@dataclass(frozen=True)
class Affinity:
    cpus: str | None = None  # `0-23,48-71`
    numa: str | None = None  # `0`, or `N/A`
    gpu_numa_id: str | None = None  # newer drivers; `N/A` unless the GPU is a NUMA node


@dataclass(frozen=True)
class Topology:
    gpus: tuple[int, ...]  # GPU indexes, in the matrix's order
    links: dict[tuple[int, int], Link]  # every ordered GPU pair (a != b)
    affinity: dict[int, Affinity]
    nics: tuple[str, ...] = ()  # `NIC0`, `mlx5_0`, ...
    nic_links: dict[tuple[str, str], Link] = field(default_factory=dict)  # (GPUn or NIC, NIC)
    nic_names: dict[str, str] = field(default_factory=dict)  # NIC0 -> mlx5_0

    def link(self, a: int, b: int) -> Link:
        return Link("X") if a == b else self.links[(a, b)]

    @property
    def has_nvlink(self) -> bool:
        return any(link.is_nvlink for link in self.links.values())


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """A header line -> (device columns, trailing column names); None for any other line."""
    tokens = line.split()
    if not tokens or not _GPU.match(tokens[0]):
        return None
    rest = line[line.index(tokens[0]):]
    trailing = [name for name in TRAILING if name in rest]
    first = min((rest.index(name) for name in trailing), default=len(rest))
    devices = rest[:first].split()
    if not all(_GPU.match(d) or d.startswith(("NIC", "mlx", "ib")) for d in devices):
        return None
    return devices, trailing


def parse_topology(text: str) -> Topology:
    """`nvidia-smi topo -m`'s output (legends and all) -> Topology; TopologyError without one."""
    lines = text.splitlines()
    found = next(((i, h) for i, line in enumerate(lines) if (h := _header(line))), None)
    if found is None:
        raise TopologyError("no `nvidia-smi topo -m` matrix in the text (no GPU0 header line)")
    start, (columns, trailing) = found
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1:]:
        tokens = line.split()
        if not tokens or tokens[0] not in columns:
            if rows:
                break  # the matrix ended (a blank line, the legend)
            continue
        rows[tokens[0]] = tokens[1:]
    return _topology(columns, trailing, rows, _nic_names(lines))


def _nic_names(lines: Sequence[str]) -> dict[str, str]:
    return {m.group(1): m.group(2) for line in lines if (m := _NIC_LEGEND.match(line))}


def _topology(columns: list[str], trailing: list[str], rows: dict[str, list[str]],
              nic_names: dict[str, str]) -> Topology:
    gpus = tuple(int(m.group(1)) for c in columns if (m := _GPU.match(c)))
    nics = tuple(c for c in columns if not _GPU.match(c))
    links: dict[tuple[int, int], Link] = {}
    nic_links: dict[tuple[str, str], Link] = {}
    affinity: dict[int, Affinity] = {}
    for name, cells in rows.items():
        if len(cells) < len(columns):
            raise TopologyError(f"the row of {name} has {len(cells)} cells for {len(columns)} columns")
        for column, cell in zip(columns, cells, strict=False):
            if column == name:
                continue
            if _GPU.match(name) and _GPU.match(column):
                links[(int(name[3:]), int(column[3:]))] = Link(cell)
            elif not _GPU.match(column):
                nic_links[(name, column)] = Link(cell)
        if _GPU.match(name):
            values = dict(zip(trailing, cells[len(columns):], strict=False))
            affinity[int(name[3:])] = Affinity(values.get("CPU Affinity"), values.get("NUMA Affinity"),
                                               values.get("GPU NUMA ID"))
    missing = [(a, b) for a in gpus for b in gpus if a != b and (a, b) not in links]
    if missing:
        raise TopologyError(f"the matrix has no row for GPU{missing[0][0]}")
    return Topology(gpus, links, affinity, nics, nic_links, nic_names)


@dataclass(frozen=True)
class GroupLinks:
    """One tensor-parallel group: its GPUs and the paths inside it."""

    gpus: tuple[int, ...]
    slowest: Link | None  # None for a group of one GPU (no all-reduce)

    @property
    def nvlink(self) -> bool:
        """Every pair inside talks over NVLink (or the group has one GPU)."""
        return self.slowest is None or self.slowest.is_nvlink

    @property
    def crosses_socket(self) -> bool:
        return self.slowest is not None and self.slowest.kind == "SYS"

    @property
    def crosses_host_bridge(self) -> bool:
        return self.slowest is not None and self.slowest.kind in (*HOST_BRIDGE, "SYS")


@dataclass(frozen=True)
class LayoutLinks:
    """The plan's TP groups on this topology; `missing` names GPUs the layout gives ranks to
    that the matrix does not have, `short` how many GPUs it needs beyond those visible (the
    check says nothing of either)."""

    tensor: int
    groups: tuple[GroupLinks, ...]
    missing: tuple[int, ...] = ()
    short: int = 0

    @property
    def slowest(self) -> Link | None:
        links = [g.slowest for g in self.groups if g.slowest is not None]
        return max(links, key=lambda link: link.slowness) if links else None

    @property
    def over_pcie(self) -> bool:
        """Some TP group's all-reduce leaves NVLink."""
        return any(not g.nvlink for g in self.groups)

    @property
    def crosses_socket(self) -> bool:
        return any(g.crosses_socket for g in self.groups)

    def describe(self) -> str:
        """`TP8 over SYS links` / `TP4 over NV18`."""
        slowest = self.slowest
        return f"TP{self.tensor} over " + (f"{slowest.text} links" if slowest else "one GPU")


def layout_links(topology: Topology, layout: Layout,
                 visible: Sequence[int] | None = None) -> LayoutLinks:
    """The TP groups of `layout` on `topology`: ranks in the order of `visible`
    (CUDA_VISIBLE_DEVICES; default every GPU in index order), TP innermost."""
    order = list(visible) if visible is not None else sorted(topology.gpus)
    needed = order[:layout.total_gpus]
    missing = tuple(g for g in needed if g not in topology.gpus)
    tp = layout.tensor
    groups = []
    for start in range(0, len(needed) - tp + 1, tp):
        members = tuple(needed[start:start + tp])
        if any(g not in topology.gpus for g in members):
            continue
        pairs = [topology.link(a, b) for a in members for b in members if a != b]
        slowest = max(pairs, key=lambda link: link.slowness) if pairs else None
        groups.append(GroupLinks(members, slowest))
    return LayoutLinks(tp, tuple(groups), missing, layout.total_gpus - len(needed))
