"""`--limit` read as Ansible reads it: host names, group names and shell-style patterns
(`gpu*`, `gpu[12]`), several joined by `,` (or `:`), and `!PATTERN` leaving hosts out
(`gpus:!gpu3`). It narrows the plan's hosts; it never adds one."""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from orchestrator.errors import InventoryError

if TYPE_CHECKING:
    from orchestrator.inventory.models import Inventory

_GLOB = "*?["


def terms(inventory: Inventory, limit: list[str]) -> list[str]:
    """Each --limit item split at `:` as Ansible's `a:b:!c` (a host name may hold a `:`
    itself: such a name is kept whole)."""
    out: list[str] = []
    for item in limit:
        whole = item.lstrip("!")
        out += [item] if whole in inventory.hosts or whole in inventory.groups else \
            [part for part in item.split(":") if part]
    return out


def matches(inventory: Inventory, pattern: str) -> list[str]:
    """The inventory's hosts a name, a group or a pattern (over both) stands for."""
    if pattern in inventory.hosts:
        return [pattern]
    if pattern in inventory.groups:
        return inventory.select(pattern)
    if not any(c in pattern for c in _GLOB):
        return []
    out = [h for h in inventory.hosts if fnmatch.fnmatchcase(h, pattern)]
    for group in inventory.groups:
        if fnmatch.fnmatchcase(group, pattern):
            out += [h for h in inventory.select(group) if h not in out]
    return out


def narrow(inventory: Inventory, names: list[str], limit: list[str]) -> list[str]:
    """The plan's hosts `names` (in order) that the --limit items keep (all of them when
    there is no --limit)."""
    if not limit:
        return names
    kept: list[str] | None = None  # None: only exclusions, so every host of the plan
    dropped: set[str] = set()
    outside: list[str] = []
    for term in terms(inventory, limit):
        pattern = term[1:] if term.startswith("!") else term
        hosts = matches(inventory, pattern)
        if not hosts:
            raise InventoryError(f"--limit names {pattern}, which matches no host or group of "
                                 f"the inventory{_where(inventory)}", hint=_known(inventory))
        if term.startswith("!"):
            dropped.update(hosts)
            continue
        if not set(hosts) & set(names):
            outside.append(pattern)
        kept = [*(kept or []), *hosts]
    if outside:
        raise InventoryError(f"--limit names {', '.join(outside)}, not among the plan's hosts "
                             f"({', '.join(names)})")
    out = [name for name in names if (kept is None or name in kept) and name not in dropped]
    if not out:
        raise InventoryError(f"--limit {','.join(limit)} leaves none of the plan's hosts "
                             f"({', '.join(names)})")
    return out


def _where(inventory: Inventory) -> str:
    return f" ({inventory.source})" if inventory.source else ""


def _known(inventory: Inventory) -> str:
    hosts = ", ".join(inventory.hosts) or "none"
    groups = ", ".join(inventory.groups) or "none"
    return f"known hosts: {hosts}; groups: {groups}; a pattern such as 'gpu*' matches either"
