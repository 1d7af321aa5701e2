"""Where an SSH connection goes: an inventory host resolved into a chain of hops.

Pure data and pure functions (no fabric, no paramiko) so that `orch` can decide how to
reach a host without paying for the SSH imports, and tests can check the resolution on
tables of inventories.

A host's `jump:` names another inventory host (itself resolved the same way, so jumps may
chain) or an OpenSSH-style `user@host:port` destination, which `~/.ssh/config` may refine
like any host name. A host without `jump:` may still get one from `ProxyJump` in the ssh
config; that is applied when the connection is built (see `ssh_connection.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from orchestrator.errors import AuthError, InventoryError
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.inventory.destination import parse_destination
from orchestrator.local_files import not_a_file

DEFAULT_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class SshTarget:
    """One hop. `None` fields are left to `~/.ssh/config`, then to OpenSSH defaults."""

    name: str  # inventory name (or the jump text), for messages
    host: str  # what `ssh` would be given: an address, a name or an ssh config alias
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    jump: SshTarget | None = None

    def hops(self) -> list[SshTarget]:
        """The chain from the first hop the controller dials to this target, in order."""
        chain: list[SshTarget] = []
        hop: SshTarget | None = self
        while hop is not None:
            chain.append(hop)
            hop = hop.jump
        return list(reversed(chain))


def resolve_target(name: str, inventory: Inventory) -> SshTarget:
    """The hop chain that reaches inventory host `name` over SSH."""
    return _resolve(name, inventory, trail=())


def _resolve(name: str, inventory: Inventory, trail: tuple[str, ...]) -> SshTarget:
    spec = host_spec(name, inventory)
    if spec.connection == "local":
        via = f" (jump of {trail[-1]!r})" if trail else ""
        raise InventoryError(
            f"host {name!r}{via} has connection: local and cannot be reached over SSH",
            hint="a jump host must be an SSH host",
        )
    jump: SshTarget | None = None
    if spec.jump is not None:
        path = (*trail, name)
        if spec.jump in path:
            loop = " -> ".join([*path, spec.jump])
            raise InventoryError(f"jump hosts form a loop: {loop}")
        if spec.jump in inventory.hosts:
            jump = _resolve(spec.jump, inventory, path)
        else:
            hop = parse_destination(spec.jump)
            jump = SshTarget(name=hop.text, host=hop.host, port=hop.port, user=hop.user)
    return _target(name, spec, jump)


def _target(name: str, spec: HostSpec, jump: SshTarget | None) -> SshTarget:
    return SshTarget(
        name=name,
        host=spec.address or name,
        port=spec.port,
        user=spec.user,
        identity_file=spec.identity_file,
        connect_timeout=spec.connect_timeout,
        jump=jump,
    )


def host_spec(name: str, inventory: Inventory) -> HostSpec:
    """The inventory entry for `name`, or an error listing the known hosts."""
    spec = inventory.hosts.get(name)
    if spec is None:
        where = f" in {inventory.source}" if inventory.source else ""
        known = ", ".join(sorted(inventory.hosts)) or "none"
        raise InventoryError(f"no host named {name!r}{where}", hint=f"known hosts: {known}")
    return spec


def identity_path(hop: SshTarget) -> str:
    """The hop's `identity_file`, expanded; an AuthError when it is not a file, for both SSH
    clients (the `ssh` client would warn and quietly try other keys)."""
    assert hop.identity_file is not None
    path = os.path.expanduser(hop.identity_file)
    why = not_a_file(path)
    if why is not None:
        raise AuthError(f"identity_file {hop.identity_file!r} {why}", host=hop.name,
                        hint="fix `identity_file` for this host in the inventory")
    return path
