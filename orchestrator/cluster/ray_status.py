"""What `ray status` says about the cluster: the active nodes and the GPUs they offer.

    Node status
    ---------------------------------------------------------------
    Active:
     1 node_9b7fc36b231e7b354f69702012ccb61a6cd617387aeb0704e0f98e55
    Pending:
     (no pending nodes)
    ...
    Total Usage:
     0.0/1.0 CPU
     0.0/8.0 GPU

(Ray 2.60.) `ray status` needs no dashboard, only the GCS; `ray list nodes` would. It
names no node address (not even with -v), so when the cluster does not form, a short
driver on the head (`ALIVE_ADDRESSES`, run with the venv's python) lists the addresses of
the nodes that joined, and the ones missing are named by host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

_NODE = re.compile(r"^\s*\d+\s+node_[0-9a-f]+\s*$")
_GPU = re.compile(r"^\s*[\d.]+/([\d.]+)\s+GPU\s*$")


@dataclass(frozen=True)
class RayStatus:
    active_nodes: int
    gpus: float

    def complete(self, nodes: int, gpus: int) -> bool:
        return self.active_nodes >= nodes and self.gpus >= gpus


def parse_ray_status(text: str) -> RayStatus | None:
    """None when the text is not a status report (the GCS is not up yet, say)."""
    section = ""
    nodes = 0
    gpus = 0.0
    seen = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and not stripped.startswith("("):
            section = stripped[:-1]
            seen = seen or section == "Active"
            continue
        if section == "Active" and _NODE.match(line):
            nodes += 1
        match = _GPU.match(line)
        if match and section == "Total Usage":
            gpus = float(match.group(1))
    return RayStatus(nodes, gpus) if seen else None


# argv[1]: the cluster's address. One JSON line: the addresses of the nodes alive.
ALIVE_ADDRESSES = (
    "import json, sys, ray\n"
    "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
    "print(json.dumps(sorted({n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']})))\n"
)


def parse_alive_addresses(text: str) -> set[str] | None:
    """The addresses `ALIVE_ADDRESSES` printed (its last line), None if it printed none."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return set(value)
    return None


def not_joined(
    addresses: Iterable[tuple[str, str]], alive: set[str]
) -> list[tuple[str, str]]:
    """The (host, address) pairs whose address is not among the alive."""
    return [(host, address) for host, address in addresses if address not in alive]
