"""`[user@]host[:port]`, the way `ssh -J` reads a destination: a host's `jump:` when it is
not a host of the inventory (checked where the inventory is loaded, used by the transport)."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import InventoryError


@dataclass(frozen=True)
class Destination:
    text: str  # as written, for messages
    host: str
    port: int | None = None
    user: str | None = None


def parse_destination(text: str) -> Destination:
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
    return Destination(text=text, host=host, port=port, user=user)
