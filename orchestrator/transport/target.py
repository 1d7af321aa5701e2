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

from dataclasses import dataclass

from orchestrator.errors import InventoryError
from orchestrator.inventory import HostSpec, Inventory

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


def parse_destination(text: str) -> SshTarget:
    """`[user@]host[:port]` (IPv6 as `[addr]:port`) into a hop, the way `ssh -J` reads it."""
    rest = text.strip()
    if not rest:
        raise InventoryError("empty jump destination", hint="expected [user@]host[:port]")
    user: str | None = None
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        if not user:
            raise InventoryError(f"jump {text!r} has an empty user before '@'")
    port_text: str | None = None
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise InventoryError(f"jump {text!r}: unclosed '[' in the address")
        host, after = rest[1:end], rest[end + 1 :]
        if after:
            if not after.startswith(":"):
                raise InventoryError(f"jump {text!r}: expected ':port' after ']'")
            port_text = after[1:]
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:
        host = rest  # a bare IPv6 address has several colons and no port
    if not host:
        raise InventoryError(f"jump {text!r} has no host", hint="expected [user@]host[:port]")
    port: int | None = None
    if port_text is not None:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise InventoryError(
                f"jump {text!r}: port {port_text!r} is not a number from 1 to 65535"
            )
        port = int(port_text)
    return SshTarget(name=text, host=host, port=port, user=user)


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
            jump = parse_destination(spec.jump)
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
