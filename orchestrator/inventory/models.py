"""The inventory's model: hosts, groups, their variables and SSH settings (validated where
the file is loaded; inventory/__init__.py loads it, inventory/ansible.py reads Ansible's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.errors import InventoryError
from orchestrator.inventory.missing import unknown_host_hint
from orchestrator.names import check_name
from orchestrator.plan.models import FieldError
from orchestrator.plan.variables import ENV_REF

DEFAULT_INVENTORY = Path("inventory/local.yaml")


class _Strict(BaseModel):
    # strict: a bool is not a port (`port: true` would be port 1), a string not a number
    model_config = ConfigDict(extra="forbid", strict=True)


class HostSpec(_Strict):
    connection: Literal["ssh", "local"] = Field("ssh", description="How to reach the host.")
    address: str | None = Field(None, description="Address or name (default: the host's name).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port (default 22 or ssh config).")
    user: str | None = Field(None, description="SSH user (default: ssh config or current user).")
    identity_file: str | None = Field(None, description="Private key file.")
    jump: str | None = Field(None, description="Another inventory host (or user@host:port) to jump through.")
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to wait for a connection.")
    vars: dict[str, Any] = Field(default_factory=dict, description="Host variables (e.g. gpus).")


class SshSettings(_Strict):
    known_hosts: str | Literal[False] = Field(
        "~/.ssh/known_hosts",
        description="known_hosts file checked for host keys; `false` turns checking off.",
    )
    config: str | Literal[False] = Field(
        "~/.ssh/config", description="OpenSSH client config to honour; `false` to ignore."
    )
    connect_retries: int = Field(4, ge=0, description="Retries of transient connection failures.")
    transport: Literal["auto", "openssh", "paramiko"] = Field(
        "auto",
        description="auto (the default): openssh where the `ssh` client can serve the host, "
                    "else paramiko; openssh: the `ssh` client with one master connection per "
                    "host kept for `control_persist` seconds, so a re-apply reuses it; "
                    "paramiko: in-process (docs/hosts.md).",
    )
    control_persist: float = Field(
        60.0, gt=0, description="openssh: seconds an idle master connection stays open.")


class Inventory(_Strict):
    hosts: dict[str, HostSpec] = Field(default_factory=dict)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    group_vars: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Variables of every host of a group (a host's own win).")
    ssh: SshSettings = Field(default_factory=SshSettings)
    source: str = Field("", exclude=True, description="File this inventory was read from.")

    @model_validator(mode="after")
    def _host_names_are_names(self) -> Inventory:
        for name in self.hosts:
            try:
                check_name(name, "a host name (it names the host's folder in a run folder)")
            except ValueError as error:
                raise FieldError(str(error), at=("hosts", name)) from None
        return self

    @model_validator(mode="after")
    def _groups_name_hosts(self) -> Inventory:
        for group, members in self.groups.items():
            if group in self.hosts:
                raise FieldError(f"group {group!r} has the same name as a host", at=("groups", group))
            for index, member in enumerate(members):
                if member not in self.hosts and member not in self.groups:
                    known = ", ".join(sorted([*self.hosts, *self.groups])) or "none"
                    raise FieldError(f"group {group!r} names unknown host {member!r} "
                                     f"(known: {known})", at=("groups", group, index))
        acyclic: set[str] = set()
        for group in self.groups:
            cycle = self._cycle(group, (), acyclic)
            if cycle:
                raise FieldError("groups contain each other in a cycle: " + " -> ".join(cycle),
                                 at=("groups", group))
        return self

    def _cycle(self, group: str, trail: tuple[str, ...], acyclic: set[str]) -> tuple[str, ...]:
        """A cycle through `group`, if any; `acyclic` remembers groups already cleared, so
        groups sharing subgroups are walked once, not once per path."""
        if group in trail:
            return (*trail[trail.index(group):], group)
        if group in acyclic:
            return ()
        for member in self.groups.get(group, []):
            if member in self.groups:
                found = self._cycle(member, (*trail, group), acyclic)
                if found:
                    return found
        acyclic.add(group)
        return ()

    @model_validator(mode="after")
    def _group_vars_name_groups(self) -> Inventory:
        for group in self.group_vars:
            if group not in self.groups:
                known = ", ".join(sorted(self.groups)) or "none"
                raise FieldError(f"group_vars names {group!r}, which is not a group (groups: "
                                 f"{known})", at=("group_vars", group))
        return self

    @model_validator(mode="after")
    def _jumps_name_hosts(self) -> Inventory:
        for name, spec in self.hosts.items():
            jump = spec.jump
            if jump is None or jump in self.hosts or any(c in jump for c in "@:.["):
                continue
            # A bare name that is not a host here would go to DNS: surely a typo.
            raise FieldError(
                f"jump {jump!r} is not a host of this inventory (known: "
                f"{', '.join(sorted(self.hosts))}); write user@host[:port] for a host outside it",
                at=("hosts", name, "jump"))
        return self

    @model_validator(mode="after")
    def _jumps_do_not_loop(self) -> Inventory:
        """A host that jumps through itself, at once or via others, at the jump that closes
        the loop (its line in the file), not only when a connection is tried."""
        for name in self.hosts:
            path = [name]
            while (jump := self.hosts[path[-1]].jump) in self.hosts:
                if jump in path:
                    loop = " -> ".join([*path[path.index(jump):], jump])
                    raise FieldError(f"jump hosts form a loop: {loop}",
                                     at=("hosts", path[-1], "jump"))
                path.append(jump)
        return self

    @model_validator(mode="after")
    def _no_secret_references(self) -> Inventory:
        # A secret is named in the plan, where the loader checks it lands only in a private
        # place; through `${host.X}` it could land anywhere (a script, a command line), and
        # be checked only per host, after the plan. One home for secrets: the plan.
        places: list[tuple[tuple[str, ...], dict[str, Any]]] = [
            (("hosts", name, "vars"), spec.vars) for name, spec in self.hosts.items()]
        places += [(("group_vars", group), values) for group, values in self.group_vars.items()]
        for at, values in places:
            for variable, value in values.items():
                found = ENV_REF.search(str(value))  # a list or map: in any item
                if found:
                    raise FieldError(
                        f"{found.group(0)} in an inventory variable: secrets are named in the "
                        f"plan, not the inventory (write {found.group(0)} in the plan's env: "
                        "or files[].content)", at=(*at, variable))
        return self

    def host_values(self, name: str) -> dict[str, Any]:
        """What `${host.X}` reads for host `name`: its groups' vars (the outermost group
        first, so the nearer group wins), its own vars, then the built-ins name and address."""
        values: dict[str, Any] = {}
        for group in self._groups_of(name):
            values.update(self.group_vars.get(group, {}))
        spec = self.hosts[name]
        values.update(spec.vars)
        values.update(name=name, address=spec.address or name)
        return values

    def value_origin(self, name: str, variable: str) -> str:
        """Which inventory entry gave host `name` its `variable` (for --show-origin)."""
        where = f" ({self.source})" if self.source else ""
        if variable in ("name", "address"):
            return "built in" if variable == "name" or not self.hosts[name].address else \
                f"hosts.{name}.address{where}"
        if variable in self.hosts[name].vars:
            return f"hosts.{name}.vars.{variable}{where}"
        for group in reversed(self._groups_of(name)):
            if variable in self.group_vars.get(group, {}):
                return f"group_vars.{group}.{variable}{where}"
        return "not set"

    def _groups_of(self, name: str) -> list[str]:
        """The groups holding host `name`, farthest first (a group holding a group holding
        it comes before the group holding it directly)."""
        distance: dict[str, int] = {}
        for group in self.groups:
            found = self._distance(group, name, ())
            if found is not None:
                distance[group] = found
        return sorted(distance, key=lambda g: (-distance[g], g))

    def _distance(self, group: str, name: str, trail: tuple[str, ...]) -> int | None:
        members = self.groups.get(group, [])
        if name in members:
            return 1
        nearest = [d for m in members if m in self.groups and m not in trail
                   and (d := self._distance(m, name, (*trail, group))) is not None]
        return 1 + min(nearest) if nearest else None

    def select(self, hosts: str | list[str]) -> list[str]:
        """Host names for a plan's `hosts:` (a group, a host, or a list of either), in order
        (`--limit` narrows them: inventory/limit.py)."""
        wanted = [hosts] if isinstance(hosts, str) else list(hosts)
        names: list[str] = []
        expanded: dict[str, list[str]] = {}
        for item in wanted:
            for name in self._expand(item, (), expanded):
                if name not in names:
                    names.append(name)
        return names

    def _expand(self, item: str, trail: tuple[str, ...], expanded: dict[str, list[str]]) -> list[str]:
        if item in self.hosts:
            return [item]
        if item in self.groups:
            # A group met again on the same path is a cycle; on another path (two groups
            # sharing a subgroup) it is not, and its hosts are known already.
            if item in trail:
                raise InventoryError(f"group {item!r} contains itself")
            if item not in expanded:
                out: list[str] = []
                for member in self.groups[item]:
                    out += [n for n in self._expand(member, (*trail, item), expanded)
                            if n not in out]
                expanded[item] = out
            return expanded[item]
        known = sorted([*self.hosts, *self.groups])
        where = f" in {self.source}" if self.source else ""
        raise InventoryError(
            f"no host or group named {item!r}{where}", hint=unknown_host_hint(known, self.source))
