"""`nvidia-smi topo -m` parsed from real outputs, and the plan's TP groups checked against them.

The fixtures under tests/limits/topo/ are real outputs, kept verbatim (whitespace as published):
# pcie-8x-l4-phb-sys.txt: 8x NVIDIA L4, two sockets, PHB within, SYS across; newer driver
#   (GPU NUMA ID). From the README of a public GitHub project fine-tuning Whisper large-v3 on
#   8x L4 ("GPU configuration"), found through the code index.
# pcie-5x-rtx4090-sys-node-phb.txt: 5 PCIe GPUs on a two-socket board (SYS, NODE, PHB), driver
#   580.126.20 with GPU NUMA ID: https://github.com/noonghunna/club-3090/issues/46
# nvlink-4x-h100-nv18-nic.txt: 4x H100 80GB HBM3, NV18 everywhere, one NIC row and the NIC
#   Legend: a public blog post on NCCL all_reduce benchmarking, found through the code index.
# nvlink-8x-a100-nv12-8nics.txt: 8x A100-SXM4-80GB, NV12, eight mlx5 NICs as rows and columns,
#   CPU and NUMA Affinity without GPU NUMA ID (an older driver): from a DeepEP/NVSHMEM RoCE
#   bandwidth issue thread (deepseek-ai/DeepEP), found through the code index.
# Not found complete: an 8-GPU RTX PRO 6000 (the seed's box), and an old driver's matrix with only
# `CPU Affinity` and `mlx4_0` columns (https://github.com/kubernetes/kubernetes/issues/53497 shows
# one, but only its first rows could be read).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.engines import engine
from orchestrator.limits.topology import Link, TopologyError, layout_links, parse_topology

TOPO = Path(__file__).parent / "topo"


def read(name: str) -> str:
    return (TOPO / name).read_text()


# fixture -> (GPUs, NICs, link 0-1, link 0-last GPU, GPU0's CPU affinity, NUMA, GPU NUMA ID)
FIXTURES = {
    "pcie-8x-l4-phb-sys.txt": (8, (), "PHB", "SYS", "0-23,48-71", "0", "N/A"),
    "pcie-5x-rtx4090-sys-node-phb.txt": (5, (), "SYS", "SYS", "8-15,24-31", "1", "N/A"),
    "nvlink-4x-h100-nv18-nic.txt": (4, ("NIC0",), "NV18", "NV18", "0-103", "0", "N/A"),
    "nvlink-8x-a100-nv12-8nics.txt": (8, tuple(f"NIC{i}" for i in range(8)), "NV12", "NV12",
                                      "0-31,64-95", "0", None),
}


@pytest.mark.parametrize("name", FIXTURES)
def test_real_outputs_parse(name: str) -> None:
    gpus, nics, first, last, cpus, numa, gpu_numa = FIXTURES[name]
    topo = parse_topology(read(name))
    assert topo.gpus == tuple(range(gpus))
    assert topo.nics == nics
    assert topo.link(0, 1).text == first
    assert topo.link(0, gpus - 1).text == last
    assert topo.link(3, 3).kind == "X"
    assert (topo.affinity[0].cpus, topo.affinity[0].numa, topo.affinity[0].gpu_numa_id) == (cpus, numa, gpu_numa)
    assert len(topo.links) == gpus * (gpus - 1)  # every ordered GPU pair, no NIC among them


def test_nic_rows_and_legend_are_kept_apart() -> None:
    topo = parse_topology(read("nvlink-8x-a100-nv12-8nics.txt"))
    assert topo.nic_names["NIC7"] == "mlx5_7"
    assert topo.nic_links[("GPU0", "NIC0")].text == "PXB"
    assert topo.nic_links[("NIC0", "NIC1")].text == "PIX"
    assert topo.affinity[4].cpus == "32-63,96-127"
    assert topo.has_nvlink


def test_links_order_fastest_to_slowest() -> None:
    order = ["NV18", "NV12", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]
    assert sorted(order[::-1], key=lambda t: Link(t).slowness) == order
    assert Link("SOC").kind == "SYS"  # older drivers' name
    assert Link("NV12").nvlinks == 12


@pytest.mark.parametrize("text", ["", "no matrix here\n", "GPU0 GPU1\nGPU0 X\n"])
def test_no_matrix_is_an_error(text: str) -> None:
    with pytest.raises(TopologyError):
        parse_topology(text)


# (fixture, service.args, visible GPUs) -> (TP groups, slowest link text per group,
#   crosses a socket, leaves NVLink, missing, short)
LAYOUTS = [
    ("pcie-8x-l4-phb-sys.txt", {"tensor-parallel-size": 8}, None,
     [(0, 1, 2, 3, 4, 5, 6, 7)], ["SYS"], True, True, (), 0),
    ("pcie-8x-l4-phb-sys.txt", {"tensor-parallel-size": 4, "data-parallel-size": 2}, None,
     [(0, 1, 2, 3), (4, 5, 6, 7)], ["PHB", "PHB"], False, True, (), 0),
    # CUDA_VISIBLE_DEVICES=0,4,1,5: each TP2 group straddles the sockets
    ("pcie-8x-l4-phb-sys.txt", {"tensor-parallel-size": 2, "data-parallel-size": 2}, [0, 4, 1, 5],
     [(0, 4), (1, 5)], ["SYS", "SYS"], True, True, (), 0),
    ("pcie-5x-rtx4090-sys-node-phb.txt", {"tensor-parallel-size": 2, "pipeline-parallel-size": 2}, [1, 2, 3, 4],
     [(1, 2), (3, 4)], ["PHB", "PHB"], False, True, (), 0),
    ("nvlink-8x-a100-nv12-8nics.txt", {"tensor-parallel-size": 8}, None,
     [tuple(range(8))], ["NV12"], False, False, (), 0),
    ("nvlink-4x-h100-nv18-nic.txt", {"tensor-parallel-size": 1}, None, [(0,)], [None], False, False, (), 0),
    ("nvlink-4x-h100-nv18-nic.txt", {"tensor-parallel-size": 8}, None, [], [], False, False, (), 4),
    ("nvlink-4x-h100-nv18-nic.txt", {"tensor-parallel-size": 2}, [2, 9], [], [], False, False, (9,), 0),
]


@pytest.mark.parametrize(("name", "args", "visible", "groups", "slowest", "socket", "pcie", "missing", "short"),
                         LAYOUTS)
def test_layout_links(name: str, args: dict[str, object], visible: list[int] | None,
                      groups: list[tuple[int, ...]], slowest: list[str | None], socket: bool, pcie: bool,
                      missing: tuple[int, ...], short: int) -> None:
    links = layout_links(parse_topology(read(name)), engine("vllm").layout(args), visible)
    assert [g.gpus for g in links.groups] == groups
    assert [g.slowest.text if g.slowest else None for g in links.groups] == slowest
    assert (links.crosses_socket, links.over_pcie, links.missing, links.short) == (socket, pcie, missing, short)


def test_layout_links_describe_the_seed() -> None:
    links = layout_links(parse_topology(read("pcie-8x-l4-phb-sys.txt")), engine("vllm").layout({"tensor-parallel-size": 8}))
    assert links.describe() == "TP8 over SYS links"
    assert links.groups[0].crosses_host_bridge
