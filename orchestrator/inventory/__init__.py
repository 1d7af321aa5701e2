"""Inventory: the hosts orch can reach, their groups and connection settings.

    hosts:
      gpu1: {address: 10.0.0.5, port: 22, user: ubuntu, identity_file: ~/.ssh/id_ed25519,
             jump: bastion, vars: {gpus: 8}}
      localhost: {connection: local}
    groups:
      blackwell: [gpu1]
    group_vars:
      blackwell: {nccl_ifname: enp1s0}   # a host's own vars win
    ssh:
      known_hosts: ~/.ssh/known_hosts   # checked by default; `false` is the explicit opt-out

`~/.ssh/config` is honoured for anything a host entry leaves unset.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import InventoryError
from orchestrator.inventory.ansible import load_ansible_inventory
from orchestrator.inventory.missing import BUILT_IN
from orchestrator.inventory.models import DEFAULT_INVENTORY, HostSpec, Inventory, SshSettings
from orchestrator.plan.loader import load_validated_yaml

__all__ = ["DEFAULT_INVENTORY", "HostSpec", "Inventory", "SshSettings", "load_inventory"]


def load_inventory(path: Path | str | None = None) -> Inventory:
    """Read and validate an inventory file (default `inventory/local.yaml`): orch's own
    format, or an Ansible inventory in YAML or INI (see inventory/ansible.py)."""
    file = Path(path) if path is not None else DEFAULT_INVENTORY
    if path is None and not os.path.lexists(file):
        # No inventory at all: the embedded default is this machine.
        return Inventory(hosts={"localhost": HostSpec(connection="local")}, source=BUILT_IN)
    inventory = load_ansible_inventory(file, what="inventory file")
    if inventory is None:  # orch's own format
        inventory = load_validated_yaml(file, Inventory, error=InventoryError,
                                        what="inventory file")
    inventory.source = str(file)
    return inventory
