"""Ansible inventories, YAML and INI, read into orch's `Inventory`.

    load_ansible_inventory(path)   the file's Inventory, or None when it is in orch's own format
    parse_ini, parse_yaml          the file as written -> Parsed (ansible_parse.py, pure)
    to_inventory(parsed)           Parsed -> Inventory: groups, precedence, connection keys (pure)

Hosts keep their Ansible names; `ansible_host`, `ansible_port`, ... become HostSpec fields,
other variables become HostSpec.vars with Ansible's precedence (`all` < parent group < child
group < host; groups of equal depth by `ansible_group_priority`, then name). Groups are
flattened: an orch group lists every host of the Ansible group and of its descendants, so a
group reached along two paths (a diamond) is not mistaken for a cycle. `all` and `ungrouped`
are groups as in Ansible. Connection keys orch cannot honour (passwords, become, ProxyCommand,
non-SSH connections) are errors, never silently dropped. Every failure is an InventoryError
laid out like a plan error: file:line:column, field, what was expected, the source line.
"""

from __future__ import annotations

import re
import shlex
from collections import deque
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from orchestrator.errors import InventoryError, PlanError
from orchestrator.inventory.ansible_parse import (
    BAD_NAME,
    GROUP_KEYS,
    NAME_EXPECTED,
    ORCH_KEYS,
    Group,
    Parsed,
    Var,
    parse_ini,
    parse_yaml,
)
from orchestrator.inventory.destination import parse_destination
from orchestrator.inventory.models import Inventory
from orchestrator.plan.source import (
    FieldPath,
    Origin,
    display_path,
    kind_of,
    parse_document,
    read_document,
    read_text,
)
from orchestrator.plan.validation import Positions, Problem, as_plan_error, problems_from

Format = Literal["ini", "yaml"]

MAX_DEPTH = 64  # group nesting: deeper is a mistake, or a hostile file
YAML_SUFFIXES = (".yaml", ".yml", ".json")

# orch field -> the Ansible names that set it, the preferred (modern) name last
FIELDS: dict[str, tuple[str, ...]] = {
    "address": ("ansible_ssh_host", "ansible_host"),
    "port": ("ansible_ssh_port", "ansible_port"),
    "user": ("ansible_ssh_user", "ansible_user"),
    "identity_file": ("ansible_private_key_file", "ansible_ssh_private_key_file"),
    "connect_timeout": ("ansible_ssh_timeout", "ansible_timeout"),
}
SSH_ARGS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args")
LOGIN_PASSWORDS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")
BECOME_KEYS = ("ansible_become", "ansible_sudo", "ansible_become_password",
               "ansible_become_pass", "ansible_sudo_pass", "ansible_sudo_password")
CONNECTIONS = {"ssh": "ssh", "smart": "ssh", "paramiko": "ssh", "paramiko_ssh": "ssh",
               "local": "local"}
# ssh options that say where, as whom or with which key to connect: an inventory key says it
SSH_REPLACED = {"p": "ansible_port", "l": "ansible_user", "i": "ansible_ssh_private_key_file",
                "port": "ansible_port", "user": "ansible_user", "hostname": "ansible_host",
                "identityfile": "ansible_ssh_private_key_file",
                "proxycommand": "-J user@bastion (ProxyJump), which orch opens itself",
                "F": "~/.ssh/config, which orch reads (another file cannot be named here)"}
_SSH_VALUE_FLAGS = frozenset("BbcDEeFIiJLlmOopQRSWw")  # ssh flags that take a value

_YAML_START = re.compile(r"---|%|\{|[^\s=\[]+:(\s|$)")
_TRUE = {"true", "yes", "on", "1", "y", "t"}


# -- reading ---------------------------------------------------------------------------


def load_ansible_inventory(path: Path, *, what: str = "inventory file") -> Inventory | None:
    """The inventory in `path` when it is an Ansible inventory (YAML or INI); None when it is
    in orch's own format, which its own loader reads."""
    try:
        if path.suffix.lower() in YAML_SUFFIXES:
            document = read_document(path, what=what)
        else:
            text = read_text(path, what=what, expected="an inventory file")
            if detect_format(path, text) == "ini":
                return to_inventory(parse_ini(text, display_path(path)))
            document = parse_document(text, display_path(path))
    except PlanError as failure:
        raise InventoryError(str(failure)) from None
    if not is_ansible_yaml(document.data):
        return None
    return to_inventory(parse_yaml(document))


def detect_format(path: Path, text: str) -> Format:
    """`.ini` is INI and `.yaml`/`.yml`/`.json` YAML; otherwise the first line that is not
    blank or a comment decides: `[group]` or a host line is INI, `key:` is YAML."""
    suffix = path.suffix.lower()
    if suffix in (".ini", *YAML_SUFFIXES):
        return "ini" if suffix == ".ini" else "yaml"
    for raw in text.splitlines():
        line = raw.strip()
        if line and line[0] not in "#;":
            return "yaml" if _YAML_START.match(line) else "ini"
    return "yaml"  # empty: orch's own loader says so


def is_ansible_yaml(data: Any) -> bool:
    """Ansible's YAML has `all:` at the top, or groups made of hosts/children/vars; orch's
    own has hosts/groups/ssh (and anything else is left to its loader's messages)."""
    if not isinstance(data, dict):
        return False
    if "all" in data:
        return True
    if any(key in data for key in ORCH_KEYS):
        return False
    groups = [value for value in data.values() if value is not None]
    return bool(groups) and all(
        isinstance(value, dict) and value and all(key in GROUP_KEYS for key in value)
        for value in groups
    )


# -- to orch's Inventory -----------------------------------------------------------------


def to_inventory(parsed: Parsed) -> Inventory:
    """Resolve groups and variable precedence, map the connection keys, and validate the
    result with orch's own models, errors pointing back into the Ansible file."""
    for name, host in parsed.hosts.items():
        if name in parsed.groups:
            raise parsed.fail(host.origin, f"host {name!r} has the same name as a group",
                              expected="distinct names: orch plans name hosts and groups alike")
    parents = _parents(parsed)
    depth = _depths(parsed, parents)
    ancestors: dict[str, set[str]] = {}
    for name in sorted(depth, key=depth.__getitem__):  # parents before children
        ancestors[name] = {name, "all"}.union(*(ancestors[p] for p in parents[name]))
    priority = {name: _priority(parsed, group) for name, group in parsed.groups.items()}

    hosts: dict[str, Any] = {}
    members: dict[str, list[str]] = {name: [] for name in parsed.groups}
    positions = Positions(keys={}, values={}, texts={parsed.file: parsed.text},
                          order=[parsed.file], root=Origin(parsed.file, 1, 1))
    labels: dict[FieldPath, FieldPath] = {}
    for name, host in parsed.hosts.items():
        # As in Ansible, a host is `ungrouped` only when no other group holds it.
        direct = [group for group in host.groups if group != "ungrouped"] or ["ungrouped"]
        closure = set[str]().union(*(ancestors[group] for group in direct))
        for group in closure | {"all"}:
            members[group].append(name)
        merged: dict[str, Var] = {}
        for group in sorted(closure | {"all"}, key=lambda g: (depth[g], priority[g], g)):
            merged.update(parsed.groups[group].vars)
        merged.update(host.vars)
        hosts[name] = _host_spec(parsed, name, merged, positions, labels)
        positions.keys[("hosts", name)] = positions.values[("hosts", name)] = host.origin
    for group_name, declared in parsed.groups.items():
        positions.keys[("groups", group_name)] = declared.origin
        positions.values[("groups", group_name)] = declared.origin
    return _validated({"hosts": hosts, "groups": members}, positions, labels)


def _parents(parsed: Parsed) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {name: [] for name in parsed.groups}
    for name, group in parsed.groups.items():
        for child, at in group.children.items():
            if child == "all":
                raise parsed.fail(at, f"group {name!r} names 'all' as a child group",
                                  expected="'all' holds every host; it is no group's child")
            if child not in parsed.groups:
                raise parsed.fail(at, f"group {name!r} names child group {child!r}, which this "
                                  "file never declares", field=f"{name}.children",
                                  expected=f"a [{child}] or [{child}:children] section")
            if name != "all":  # every group is below `all` anyway
                parents[child].append(name)
    return parents


def _depths(parsed: Parsed, parents: dict[str, list[str]]) -> dict[str, int]:
    """Each group's depth below `all` (its longest path), parents first; a cycle or a nesting
    deeper than MAX_DEPTH is an error. Iterative: the file may nest hostilely deep."""
    waiting = {name: len(above) for name, above in parents.items() if name != "all"}
    ready = deque(name for name, count in waiting.items() if count == 0)
    depth = {"all": 0}
    while ready:
        name = ready.popleft()
        depth[name] = 1 + max((depth[p] for p in parents[name]), default=0)
        if depth[name] > MAX_DEPTH:
            raise parsed.fail(parsed.groups[name].origin, f"groups are nested more than "
                              f"{MAX_DEPTH} deep (at {name!r})", expected="a shallower tree")
        for child in parsed.groups[name].children:
            if child != "all":
                waiting[child] -= 1
                if waiting[child] == 0:
                    ready.append(child)
    stuck = [name for name in waiting if name not in depth]
    if stuck:  # each is below another stuck group: walk up until a group repeats
        trail = [stuck[0]]
        while True:
            above = next(p for p in parents[trail[-1]] if p not in depth)
            if above in trail:
                cycle = trail[trail.index(above):][::-1]  # each group contains the next
                first = min(cycle, key=list(parsed.groups).index)  # start where the file does
                at = cycle.index(first)
                loop = [*cycle[at:], *cycle[:at], first]
                raise parsed.fail(parsed.groups[loop[-2]].children[loop[-1]],
                                  "groups contain each other in a cycle: " + " -> ".join(loop),
                                  field=f"{loop[-2]}.children",
                                  expected="a tree of groups: a group cannot be its own child")
            trail.append(above)
    return depth


def _priority(parsed: Parsed, group: Group) -> int:
    var = group.vars.get("ansible_group_priority")
    if var is None:
        return 1
    if isinstance(var.value, bool) or not isinstance(var.value, int | str) \
            or not re.fullmatch(r"-?[0-9]{1,9}", str(var.value)):
        raise parsed.fail(var.at, f"ansible_group_priority must be an integer, got "
                          f"{kind_of(var.value)}", field="ansible_group_priority",
                          expected="an integer (higher wins among groups of equal depth)")
    return int(var.value)


def _host_spec(parsed: Parsed, name: str, merged: dict[str, Var], positions: Positions,
               labels: dict[FieldPath, FieldPath]) -> dict[str, Any]:
    """HostSpec data for one host from its merged variables; records where each came from."""
    spec: dict[str, Any] = {"vars": {}}

    def put(field_name: str, key: str, var: Var, value: Any) -> None:
        where: FieldPath = ("hosts", name, field_name)
        spec[field_name] = value
        positions.keys[where], positions.values[where] = var.key, var.at
        labels[where] = (name, key)

    for key, var in merged.items():
        if not key.startswith("ansible_"):
            spec["vars"][key] = var.value
            positions.keys[("hosts", name, "vars", key)] = var.key
            positions.values[("hosts", name, "vars", key)] = var.at
        else:
            _refuse(parsed, name, key, var)
    for field_name, keys in FIELDS.items():
        for key in keys:
            found = merged.get(key)
            if found is None or found.value is None:
                continue
            value = found.value
            if field_name in ("address", "user", "identity_file"):
                value = _text(value)
            elif isinstance(value, str) and re.fullmatch(r"\d{1,9}(\.\d+)?", value):
                value = float(value) if "." in value else int(value)  # Ansible's '2222'
            if field_name == "address" and isinstance(value, str) and BAD_NAME.search(value):
                raise parsed.fail(found.at, f"{value!r} is not a host name or address",
                                  field=f"{name}.{key}", expected=NAME_EXPECTED)
            put(field_name, key, found, value)
    if "ansible_connection" in merged:
        var = merged["ansible_connection"]
        put("connection", "ansible_connection", var, _connection(parsed, name, var))
    for key in SSH_ARGS:
        if key in merged:
            jump = _jump(parsed, name, key, merged[key])
            if jump is not None:
                put("jump", key, merged[key], jump)
    return spec


def _text(value: Any) -> Any:
    """A number where a name is expected (ansible_host=10.0 read as a float) as its text."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _refuse(parsed: Parsed, name: str, key: str, var: Var) -> None:
    """An error for a key that changes how the host is reached in a way orch cannot honour."""
    value = var.value
    label = f"{name}.{key}"
    if key in LOGIN_PASSWORDS and value not in (None, ""):
        raise parsed.fail(var.key, f"{key} (host {name!r}): orch signs in with SSH keys only, "
                          "never with a password", field=label, show=False,  # no secret shown
                          expected="key authentication: a key in ssh-agent, "
                                   "ansible_ssh_private_key_file, or IdentityFile in ~/.ssh/config")
    if key in BECOME_KEYS and (value not in (None, "") if key.endswith(("pass", "password"))
                               else str(value).strip().lower() in _TRUE):
        raise parsed.fail(var.key, f"{key} (host {name!r}): orch does not escalate privileges "
                          "(become/sudo) and never types a password: it runs every command as "
                          "the SSH user", field=label, show=not key.endswith(("pass", "password")),
                          expected="ansible_user set to a user with the rights the plan needs")
    reaching = key in SSH_ARGS or key == "ansible_connection" or any(
        key in keys for keys in FIELDS.values())
    if reaching and isinstance(value, str) and ("{{" in value or "{%" in value):
        raise parsed.fail(var.at, f"{key} (host {name!r}) is a Jinja template, which orch does "
                          "not evaluate", field=label, expected="the value itself")


def _connection(parsed: Parsed, name: str, var: Var) -> str:
    value = var.value
    kind = value.removeprefix("ansible.builtin.") if isinstance(value, str) else None
    if kind not in CONNECTIONS:
        shown = repr(value) if isinstance(value, str) else kind_of(value)
        raise parsed.fail(var.at, f"ansible_connection (host {name!r}) is {shown}, which orch "
                          "cannot honour: it reaches a host over SSH or runs on this machine",
                          field=f"{name}.ansible_connection",
                          expected="ssh (or smart, paramiko) or local")
    return CONNECTIONS[kind]


def _jump(parsed: Parsed, name: str, key: str, var: Var) -> str | None:
    """The ProxyJump (`-J host` or `-o ProxyJump=host`) in ssh arguments; options that say
    where or how to connect otherwise are errors; any other option is ssh's business."""
    label = f"{name}.{key}"
    if var.value is None:
        return None
    try:
        if not isinstance(var.value, str):
            raise ValueError(f"expected the ssh options as a string, got {kind_of(var.value)}")
        options = ssh_options(shlex.split(var.value))
    except ValueError as error:
        raise parsed.fail(var.at, f"{key} (host {name!r}): {error}", field=label,
                          expected="ssh options, such as -J user@bastion") from None
    jump: str | None = None
    for option, value in options:
        known = option if len(option) == 1 else option.lower()  # -o keys ignore case
        if known in SSH_REPLACED and not (known == "proxycommand" and value.lower() == "none"):
            shown = f"-{option}" if len(option) == 1 else f"-o {option}"
            raise parsed.fail(var.at, f"{key} (host {name!r}) sets {shown}, which orch does not "
                              "take from ssh options", field=label,
                              expected=f"instead: {SSH_REPLACED[known]}")
        if known in ("J", "proxyjump") and value.lower() != "none":
            jump = value.removeprefix("ssh://")
    if jump is None:
        return None
    if "," in jump:
        raise parsed.fail(var.at, f"{key} (host {name!r}) jumps through several hosts ({jump})",
                          field=label, expected="one jump host; for a chain, make the jump host "
                          "an inventory host with its own -J")
    if jump not in parsed.hosts and any(c in jump for c in "@:.["):
        try:
            parse_destination(jump)
        except InventoryError as error:
            raise parsed.fail(var.at, f"{key} (host {name!r}): {error.message}", field=label,
                              expected="-J [user@]host[:port]") from None
    return jump


def ssh_options(words: list[str]) -> list[tuple[str, str]]:
    """ssh command-line words -> (option, value) pairs: single-letter flags as themselves
    ("J", "p"), `-o Key=Value` as ("Key", "Value")."""
    found: list[tuple[str, str]] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-") or word == "-":
            continue  # a destination or a command: not an option
        for position in range(1, len(word)):
            flag = word[position]
            if flag not in _SSH_VALUE_FLAGS:
                found.append((flag, ""))
                continue
            value = word[position + 1:]
            if not value:
                if index >= len(words):
                    raise ValueError(f"-{flag} has no value")
                value, index = words[index], index + 1
            if flag == "o":
                parts = re.fullmatch(r"\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)", value, re.S)
                if parts is None:
                    raise ValueError(f"cannot read -o {value!r}: expected -o Key=Value")
                found.append((parts.group(1), parts.group(2).strip()))
            else:
                found.append((flag, value))
            break
    return found


def _validated(data: dict[str, Any], positions: Positions,
               labels: dict[FieldPath, FieldPath]) -> Inventory:
    """orch's own validation (types, ranges, jumps); each problem named by the Ansible key
    that set it ("gpu1.ansible_port") at that key's line."""
    try:
        return Inventory.model_validate(data)
    except ValidationError as error:
        problems = [
            Problem(labels.get(problem.path, problem.path), problem.message, problem.origin,
                    expected=problem.expected, hint=problem.hint, name_field=problem.name_field)
            for problem in problems_from(error, Inventory, data, positions)
        ]
        raise InventoryError(str(as_plan_error(problems, positions))) from None
