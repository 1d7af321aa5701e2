"""`${host.NAME}` references: a value that differs per host, from the inventory.

    env:
      NCCL_SOCKET_IFNAME: ${host.nccl_ifname}     # set under the host's (or a group's) vars
    service:
      args:
        tensor-parallel-size: ${host.gpus}        # alone: takes the variable's type

They are filled in per host when the plan is compiled for that host (after `${vars.X}`,
which are the same everywhere), from the inventory's variables for the host: its own
`vars`, over those of its groups, and the built-ins `name` (the inventory name) and
`address` (what SSH connects to). Where a host gets different values is where they may be
used: `env`, `files` (paths and content), `service.args`, `service.extra_args` and
`commands`; elsewhere (the venv, the port, the service name: what `orch status` must find
without knowing the host) a reference is an error. A host without the variable is an error
that names the host, the variable and where it is used, before any connection. `$${host.x}`
writes a literal `${host.x}`.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Mapping
from typing import Any

from orchestrator.plan.meaning import host_vars, patterns
from orchestrator.plan.models import Plan
from orchestrator.plan.source import FieldPath
from orchestrator.plan.variables import ReferenceProblem

HOST_REF = re.compile(r"\$\$\{host\.|\$\{host\.([A-Za-z_][A-Za-z0-9_-]*)\}")
_WHOLE = re.compile(r"\$\{host\.([A-Za-z_][A-Za-z0-9_-]*)\}")
_MISSPELT = re.compile(r"\$\{\s*(hosts?|HOST|Host)\s*[.:]")
# Where a reference may stand: the fields marked HOST_VARS in plan/models/ (the parts of a
# plan that reach one host and may differ).
ALLOWED = patterns(Plan, host_vars)


def uses_host_vars(value: Any) -> bool:
    """Whether any string in `value` refers to a host variable (or escapes one)."""
    if isinstance(value, str):
        return "${host." in value or bool(_MISSPELT.search(value))
    if isinstance(value, dict):
        return any(uses_host_vars(item) for item in value.values())
    if isinstance(value, list):
        return any(uses_host_vars(item) for item in value)
    return False


def referenced(value: Any) -> set[str]:
    """The host variable names `value` refers to."""
    if isinstance(value, str):
        return {m.group(1) for m in HOST_REF.finditer(value) if m.group(1)}
    if isinstance(value, dict):
        return set().union(*(referenced(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(referenced(item) for item in value))
    return set()


def substitute_host(data: Any, values: Mapping[str, Any], host: str, path: FieldPath = ()) -> Any:
    """`data` (a plan as YAML data) with every `${host.NAME}` replaced by `values[NAME]`."""
    if isinstance(data, dict):
        return {key: substitute_host(item, values, host, (*path, key)) for key, item in data.items()}
    if isinstance(data, list):
        return [substitute_host(item, values, host, (*path, index)) for index, item in enumerate(data)]
    if not isinstance(data, str) or "host" not in data:
        return data
    misspelt = _MISSPELT.search(data)
    if misspelt and not data[misspelt.start():].startswith("${host."):
        raise ReferenceProblem(f"{misspelt.group(0)!r} is not a host variable reference", path,
                               expected="${host.NAME}, e.g. ${host.gpus}")
    if not any(m.group(1) for m in HOST_REF.finditer(data)):
        return data.replace("$${host.", "${host.")  # only escapes
    if not any(path[:len(prefix)] == prefix for prefix in ALLOWED):
        raise ReferenceProblem(
            "a host variable cannot be used here: this value must be the same on every host",
            path, expected="host variables in env, files, service.args, service.extra_args "
                           "or commands")
    whole = _WHOLE.fullmatch(data)
    if whole and path[:1] != ("env",):  # alone, it takes the variable's type (env is text)
        return copy.deepcopy(_lookup(whole.group(1), values, host, path))
    return HOST_REF.sub(lambda m: "${host." if not m.group(1) else
                        _as_text(_lookup(m.group(1), values, host, path), m.group(1), path), data)


def _lookup(name: str, values: Mapping[str, Any], host: str, path: FieldPath) -> Any:
    if name in values:
        return values[name]
    known = sorted(values)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    raise ReferenceProblem(
        f"host {host} has no variable {name!r} (used as ${{host.{name}}})", path,
        expected=f"one of: {', '.join(known)}" if known else None,
        hint=f"did you mean {close[0]!r}?" if close else
        f"set it under `vars:` of {host} (or of a group of it) in the inventory",
    )


def _as_text(value: Any, name: str, path: FieldPath) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        raise ReferenceProblem(f"${{host.{name}}} is a {type(value).__name__}; it can stand "
                               "alone as a value but not inside a longer string", path)
    return "" if value is None else str(value)


class Placeholders(dict[str, Any]):
    """For `orch validate` (no inventory): every variable exists and reads as its reference."""

    def __missing__(self, name: str) -> str:
        return f"${{host.{name}}}"

    def __contains__(self, name: object) -> bool:
        return True
