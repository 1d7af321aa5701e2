"""The hosts of a fleet as the apply reaches them: each replica is an inventory host of its
own name (its id: `gpu1`, or `gpu1-r0`.. when several share a host) that connects as its
host does, so the run's per-host machinery (jobs, run folder, `orch status` lines) keys on
replicas unchanged; the router's place is one more (`router.name`).

`${host.X}` of a replica reads its host's variables (its name included).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from orchestrator.errors import InventoryError
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.plan.models.fleet import Router
from orchestrator.plan.replicas import Replica

CONTROLLER = "controller"  # `router.on`: this machine


class FleetInventory(Inventory):
    """The inventory with the fleet's names added: `aliases` maps each to its real host (the
    router on this machine maps to itself)."""

    aliases: dict[str, str] = Field(default_factory=dict, exclude=True)

    def host_values(self, name: str) -> dict[str, object]:
        return super().host_values(self.real(name))

    def value_origin(self, name: str, variable: str) -> str:
        return super().value_origin(self.real(name), variable)

    def real(self, name: str) -> str:
        """The inventory host `name` stands for."""
        return self.aliases.get(name, name)


def fleet_inventory(inventory: Inventory, replicas: Sequence[Replica],
                    router: Router | None) -> FleetInventory:
    """`inventory` with a host per replica (its host's connection) and the router's place."""
    hosts = dict(inventory.hosts)
    aliases: dict[str, str] = {}
    for replica in replicas:
        if replica.id != replica.host:
            hosts[replica.id] = _alias_of(inventory, replica.host)
            aliases[replica.id] = replica.host
    if router is not None:
        if router.name in hosts:
            raise InventoryError(
                f"router.name {router.name!r} is also a host of the inventory or a replica",
                hint="give the router another name (router.name)")
        if router.on == CONTROLLER:
            hosts[router.name] = HostSpec(connection="local", address="127.0.0.1")
        else:
            hosts[router.name] = _alias_of(inventory, router.on, "router.on")
            aliases[router.name] = router.on
    return FleetInventory(hosts=hosts, groups=inventory.groups, group_vars=inventory.group_vars,
                          ssh=inventory.ssh, source=inventory.source, aliases=aliases)


def _alias_of(inventory: Inventory, host: str, field: str = "") -> HostSpec:
    spec = inventory.hosts.get(host)
    if spec is None:
        where = f" in {inventory.source}" if inventory.source else ""
        raise InventoryError(f"{field or 'the fleet'} names host {host!r}, not one{where}",
                             hint="`controller` (this machine) or a host of the inventory")
    return spec.model_copy(update={"address": spec.address or host})


def worker_address(inventory: Inventory, host: str, router: Router) -> str:
    """The address the router reaches a replica's host at: loopback when both are on one
    machine (a local host and the router on the controller), else the host's address."""
    spec = inventory.hosts[host]
    local = spec.connection == "local"
    if local and (router.on == CONTROLLER or
                  inventory.hosts.get(router.on, spec).connection == "local"):
        return "127.0.0.1"
    return spec.address or host
