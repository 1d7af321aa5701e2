"""Ansible inventories as written, INI and YAML, parsed into `Parsed` (pure): hosts with
their direct groups and variables, groups with their children and variables, every value
with where it was written, so later errors point into the file.

    parse_ini(text, file)      INI text -> Parsed
    parse_yaml(document)       a parsed YAML Document -> Parsed
    expand_hosts(pattern)      gpu[01:04]:2222 -> the names and the port
"""

from __future__ import annotations

import ast
import difflib
import itertools
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import InventoryError, PlanError
from orchestrator.plan.source import Document, FieldPath, Origin, kind_of, snippet

MAX_HOSTS = 10_000  # bounds range expansion (gpu[0:99999999]) and hostile files
MAX_GROUPS = 2_000
GROUP_KEYS = ("hosts", "children", "vars")
ORCH_KEYS = ("hosts", "groups", "ssh")

_SECTION = re.compile(r"\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?")
_GROUP_NAME = re.compile(r"([^:\]\s]+)\s*(?:[#;].*)?")
_RANGE = re.compile(r"\[([0-9]*|[a-zA-Z]):([0-9]+|[a-zA-Z])(?::([0-9]+))?\]")
_PORT = re.compile(r"(.*[^:]):([0-9]+)")
_TRAILING_COMMENT = re.compile(r"\s+#.*$")
BAD_NAME = re.compile(r"[\s\x00-\x1f\x7f]|^-|^$")
NAME_EXPECTED = "a host name or address: no spaces or control characters, not starting with '-'"


@dataclass(frozen=True)
class Var:
    value: Any
    key: Origin  # where its name is written
    at: Origin  # where its value is written


@dataclass
class Group:
    origin: Origin
    declared: bool = True  # INI: [g:vars] alone does not declare g
    children: dict[str, Origin] = field(default_factory=dict)  # child name -> where named
    vars: dict[str, Var] = field(default_factory=dict)


@dataclass
class Host:
    origin: Origin
    groups: list[str] = field(default_factory=list)  # direct groups, `all` left out
    vars: dict[str, Var] = field(default_factory=dict)


@dataclass
class Parsed:
    """An Ansible inventory as written, before precedence and mapping."""

    file: str
    text: str
    hosts: dict[str, Host] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)

    def __post_init__(self) -> None:
        top = Origin(self.file, 1, 1)
        self.groups.setdefault("all", Group(top))
        self.groups.setdefault("ungrouped", Group(top))

    def fail(self, at: Origin, message: str, *, field: str | None = None,
             expected: str | None = None, hint: str | None = None,
             show: bool = True) -> InventoryError:
        """An error laid out as orch's own inventory errors are (see plan/validation.py)."""
        line, column = at.line or 1, at.column or 1
        error = PlanError(message, file=self.file, line=line, column=column, field=field,
                          expected=expected, hint=hint,
                          snippet=snippet(self.text, line, column) if show else None)
        return InventoryError(str(error))

    def group(self, name: str, at: Origin, *, declared: bool = True) -> Group:
        found = self.groups.get(name)
        if found is None:
            if len(self.groups) >= MAX_GROUPS:
                raise self.fail(at, f"more than {MAX_GROUPS:,} groups; an inventory is far smaller")
            found = self.groups[name] = Group(at, declared=declared)
        found.declared = found.declared or declared
        return found

    def add_host(self, group: str, name: str, at: Origin, variables: dict[str, Var]) -> None:
        if BAD_NAME.search(name):
            raise self.fail(at, f"{name!r} is not a host name", expected=NAME_EXPECTED)
        host = self.hosts.get(name)
        if host is None:
            if len(self.hosts) >= MAX_HOSTS:
                raise self.fail(at, f"more than {MAX_HOSTS:,} hosts; an inventory is far smaller")
            host = self.hosts[name] = Host(at)
        host.vars.update(variables)  # a host named again: its later variables win
        if group != "all" and group not in host.groups:
            host.groups.append(group)


# -- INI ---------------------------------------------------------------------------------


def parse_ini(text: str, file: str) -> Parsed:
    """Ansible's INI format: host lines (before any section: ungrouped), `[group]`,
    `[group:children]`, `[group:vars]`; `#` and `;` start comment lines."""
    parsed = Parsed(file, text)
    group, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        at = Origin(file, number, len(raw) - len(raw.lstrip()) + 1)
        header = _SECTION.fullmatch(line)
        if header:
            group, kind = header.group(1), header.group(2) or "hosts"
            if kind not in ("hosts", "children", "vars"):
                raise parsed.fail(at, f"section [{group}:{kind}] has an unknown type {kind!r}",
                                  expected=f"[{group}], [{group}:children] or [{group}:vars]")
            parsed.group(group, at, declared=kind != "vars")
        elif line.startswith("["):
            raise parsed.fail(at, "cannot read this section header",
                              expected="[group], [group:children] or [group:vars]",
                              hint="a group name has no spaces, ':' or ']' in it")
        elif kind == "hosts":
            _ini_host_line(parsed, group, raw, at)
        elif kind == "children":
            child = _GROUP_NAME.fullmatch(line)
            if child is None:
                raise parsed.fail(at, f"cannot read this line of [{group}:children]",
                                  expected="one group name per line")
            parsed.groups[group].children.setdefault(child.group(1), at)
        else:
            name, value = _ini_vars_line(parsed, group, raw, at)
            parsed.groups[group].vars[name] = value
    for name, declared in parsed.groups.items():
        if not declared.declared:  # as Ansible: [g:vars] needs [g] or [g:children] somewhere
            raise parsed.fail(declared.origin, f"[{name}:vars] sets variables of group {name!r}, "
                              "which this file never declares",
                              expected=f"a [{name}] or [{name}:children] section")
    return parsed


def _ini_host_line(parsed: Parsed, group: str, raw: str, at: Origin) -> None:
    try:
        words = shlex.split(raw, comments=True)  # quotes group a value with spaces
    except ValueError as error:
        raise parsed.fail(at, f"cannot read this host line: {error}",
                          expected="host [key=value ...], a value with spaces in quotes") from None
    if not words:
        return
    pattern, assignments = words[0], words[1:]
    try:
        names, port = expand_hosts(pattern)
    except ValueError as error:
        raise parsed.fail(at, f"host pattern {pattern!r}: {error}",
                          expected="a host, host:port, or a range such as gpu[01:04]") from None
    variables: dict[str, Var] = {}
    if port is not None:
        variables["ansible_port"] = Var(port, at, at)
    search = at.column or 1
    for word in assignments:
        key, equals, text = word.partition("=")
        if not equals or not key:
            raise parsed.fail(at, f"expected key=value after the host name, got {word!r}",
                              expected="host [key=value ...]",
                              hint="quote a value that has spaces: key='a b'")
        index = raw.find(f"{key}=", search)
        column = index + 1 if index >= 0 else at.column or 1
        search = max(search, column + len(key))
        variables[key] = Var(ini_value(text), Origin(parsed.file, at.line, column),
                             Origin(parsed.file, at.line, column + len(key) + 1))
    for name in names:
        parsed.add_host(group, name, at, variables)


def _ini_vars_line(parsed: Parsed, group: str, raw: str, at: Origin) -> tuple[str, Var]:
    key, equals, text = raw.partition("=")
    if not equals or not key.strip():
        raise parsed.fail(at, f"cannot read this line of [{group}:vars]",
                          expected="one key=value per line")
    column = len(key) + 2 + len(text) - len(text.lstrip())
    value = ini_value(text.strip(), comment=True)
    return key.strip(), Var(value, at, Origin(parsed.file, at.line, column))


def ini_value(text: str, *, comment: bool = False) -> Any:
    """A value typed as Ansible's INI reader types it: a Python literal (2222, True, 'a b',
    [1, 2]) when it is one, else the text (in a [g:vars] line, without a trailing comment)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _TRAILING_COMMENT.sub("", text) if comment else text
    return _plain(value, text)


def _plain(value: Any, text: str) -> Any:
    """Data orch can keep: tuples and sets become lists; bytes, complex and the like the text."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else text
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item, str(item)) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item, str(item)) for key, item in value.items()}
    return text


def expand_hosts(pattern: str) -> tuple[list[str], int | None]:
    """`gpu[01:04]:2222` -> (['gpu01', ..., 'gpu04'], 2222). Ranges are numeric (the width of
    a zero-padded start is kept) or single letters, with an optional stride: [1:9:2]."""
    if pattern.endswith(":"):
        raise ValueError("ends in ':' (a port is written host:2222)")
    host, port = pattern, None
    found = _PORT.fullmatch(pattern)
    # host:port, not an IPv6 address (its colons are outside brackets) nor a range's colon
    if found and ":" not in re.sub(r"\[[^\]]*\]", "", found.group(1)):
        if len(found.group(2)) > 5 or not 1 <= int(found.group(2)) <= 65535:
            raise ValueError(f"port {found.group(2)} is not from 1 to 65535")
        host, port = found.group(1), int(found.group(2))
    if host.startswith("[") and host.endswith("]") and not _RANGE.fullmatch(host):
        host = host[1:-1]  # [IPv6 address]
    parts: list[list[str]] = []
    last, count = 0, 1
    for span in _RANGE.finditer(host):
        values = _range(span)
        count *= len(values)
        if count > MAX_HOSTS:
            raise ValueError(f"expands to more than {MAX_HOSTS:,} hosts")
        parts += [[host[last:span.start()]], values]
        last = span.end()
    parts.append([host[last:]])
    return ["".join(combination) for combination in itertools.product(*parts)], port


def _range(span: re.Match[str]) -> list[str]:
    start, end, step = span.group(1) or "0", span.group(2), span.group(3) or "1"
    if max(len(start), len(end), len(step)) > 9 or int(step) < 1:
        raise ValueError(f"range {span.group(0)} is out of bounds")
    stride = int(step)
    if start.isalpha() or end.isalpha():
        if not (start.isalpha() and end.isalpha()) or start > end:
            raise ValueError(f"range {span.group(0)} must run from a letter to a later one")
        return [chr(code) for code in range(ord(start), ord(end) + 1, stride)]
    width = len(start) if start.startswith("0") and len(start) > 1 else 0
    if width and len(end) != width:
        raise ValueError(f"range {span.group(0)}: a zero-padded start and its end must have "
                         "the same width")
    if int(start) > int(end):
        raise ValueError(f"range {span.group(0)} runs backwards")
    if (int(end) - int(start)) // stride + 1 > MAX_HOSTS:
        raise ValueError(f"expands to more than {MAX_HOSTS:,} hosts")
    return [f"{number:0{width}d}" for number in range(int(start), int(end) + 1, stride)]


# -- YAML --------------------------------------------------------------------------------


def parse_yaml(document: Document) -> Parsed:
    """Ansible's YAML format: groups (`all` first, usually) made of `hosts` (name -> its
    variables), `children` (name -> a group) and `vars`."""
    parsed = Parsed(document.name, document.text)
    for name, value in document.data.items():
        _yaml_group(parsed, document, name, value, (name,), None)
    return parsed


def _yaml_group(parsed: Parsed, document: Document, name: str, value: Any, path: FieldPath,
                parent: str | None) -> None:
    at = document.keys[path]
    group = parsed.group(name, at)
    if parent is not None:
        parsed.groups[parent].children.setdefault(name, at)
    if value is None:
        return
    if not isinstance(value, dict):
        raise parsed.fail(document.values[path], f"group {name!r} must be a mapping, got "
                          f"{kind_of(value)}", expected="hosts:, children: or vars: under it")
    for key in value:
        if key not in GROUP_KEYS:
            close = difflib.get_close_matches(key, GROUP_KEYS, n=1)
            mixed = parent is None and name in ORCH_KEYS
            raise parsed.fail(
                document.keys[(*path, key)], f"unknown key {key!r} in group {name!r}",
                field=".".join(map(str, (*path, key))), expected="hosts, children or vars",
                hint=("orch's own format (hosts:, groups:, ssh: at the top) cannot be mixed "
                      "with Ansible's (all:)") if mixed else
                     (f"did you mean {close[0]!r}?" if close else None))
    for key in GROUP_KEYS:
        section = value.get(key)
        if section is not None and not isinstance(section, dict):
            raise parsed.fail(
                document.values[(*path, key)], f"{key} of group {name!r} must be a mapping, "
                f"got {kind_of(section)}", field=".".join(map(str, (*path, key))),
                expected=f"{key}: followed by indented name: lines",
                hint="end each host name with a colon, as in `gpu1:`" if key == "hosts" else None)
    for pattern, host_vars in (value.get("hosts") or {}).items():
        _yaml_host(parsed, document, name, pattern, host_vars, (*path, "hosts", pattern))
    for key, item in (value.get("vars") or {}).items():
        where = (*path, "vars", key)
        group.vars[key] = Var(item, document.keys[where], document.values[where])
    for child, child_value in (value.get("children") or {}).items():
        _yaml_group(parsed, document, child, child_value, (*path, "children", child), name)


def _yaml_host(parsed: Parsed, document: Document, group: str, pattern: str, value: Any,
               path: FieldPath) -> None:
    at = document.keys[path]
    try:
        names, port = expand_hosts(pattern)
    except ValueError as error:
        raise parsed.fail(at, f"host pattern {pattern!r}: {error}",
                          expected="a host, host:port, or a range such as gpu[01:04]") from None
    if value is not None and not isinstance(value, dict):
        raise parsed.fail(document.values[path], f"host {pattern!r}: its variables must be a "
                          f"mapping, got {kind_of(value)}",
                          expected="ansible_host: ... and other variables, indented below")
    variables = {"ansible_port": Var(port, at, at)} if port is not None else {}
    for key, item in (value or {}).items():
        variables[key] = Var(item, document.keys[(*path, key)], document.values[(*path, key)])
    for name in names:
        parsed.add_host(group, name, at, variables)
