"""`${vars.NAME}` references: resolved at load time from the plan's `vars:` map.

- A string that is exactly one reference takes the variable's value with its type
  (`tensor-parallel-size: ${vars.tp}` gives the integer 8); inside a longer string the value
  is written as text (`/opt/venvs/vllm-${vars.vllm_version}`).
- Variables may use other variables; a cycle is an error. `${vars.a.b}` reads a nested map.
- `${env:NAME}` (a secret) is left in place for `secrets.py`; other `${...}` text such as a
  shell's `${HOME}` is left alone. A misspelt reference (`${var.x}`, `${env.X}`, `${ENV:X}`)
  is an error rather than text that silently reaches a host.
- `${controller.home}` is the home folder of the user running orch, on this machine: for a
  plan whose host is this machine (`connection: local`), such as the simulated plans' venvs.
- `$${` writes a literal `${`.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import PlanError
from orchestrator.plan.source import FieldPath, dotted

ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_VAR_NAME = r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*"
_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)(\}?)")
_VAR_INNER = re.compile(rf"vars\.({_VAR_NAME})")
_ENV_INNER = re.compile(r"env:[A-Za-z_][A-Za-z0-9_]*")
_CONTROLLER = re.compile(r"\s*controller\s*[.:]\s*(.*)", re.IGNORECASE)
_WHOLE = re.compile(rf"\$\{{vars\.({_VAR_NAME})\}}")
_MAX_DEPTH = 32
_MAX_CHAIN = 100  # variables naming variables: deeper is a mistake (or a hostile file)
_MAX_TEXT = 8 * 1024 * 1024  # a value filled in is at most as large as a plan file may be


class ReferenceProblem(PlanError):
    """A bad `${...}` reference; `path` is where it was found (the loader adds the position)."""

    def __init__(
        self, message: str, path: FieldPath, *, expected: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message, field=dotted(path), expected=expected, hint=hint)
        self.path = path


def resolve_vars(variables: Mapping[str, Any]) -> dict[str, Any]:
    """The `vars:` map with references between variables resolved."""
    resolver = _Resolver(variables)
    return {name: resolver.resolve(name, ()) for name in variables}


def substitute_vars(value: Any, variables: Mapping[str, Any], path: FieldPath = ()) -> Any:
    """`value` (any YAML data) with every `${vars.NAME}` replaced; `variables` must already
    be resolved (see `resolve_vars`)."""
    return _Resolver(variables, resolved=True).walk(value, path, ())


def whole_references(value: Any, path: FieldPath = ()) -> dict[FieldPath, str]:
    """Paths whose value is exactly one `${vars.NAME}` (and takes that variable's type)."""
    out: dict[FieldPath, str] = {}
    if isinstance(value, str):
        match = re.fullmatch(r"\$\{vars\.([A-Za-z_][A-Za-z0-9_]*)\}", value.strip())
        if match and path[:1] != ("vars",):
            out[path] = match.group(1)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.update(whole_references(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.update(whole_references(item, (*path, index)))
    return out


def render_vars(text: str, variables: Mapping[str, Any]) -> str:
    """Fill `${vars.NAME}` in a text such as a file template (always returns text)."""
    result = _Resolver(variables, resolved=True).text(text, (), ())
    return result if isinstance(result, str) else _as_text(result, "", ())


class _Resolver:
    def __init__(self, variables: Mapping[str, Any], *, resolved: bool = False) -> None:
        self._raw = variables
        self._done: dict[str, Any] = dict(variables) if resolved else {}

    def resolve(self, name: str, stack: tuple[str, ...]) -> Any:
        if name in self._done:
            return self._done[name]
        if name in stack:
            chain = " -> ".join(f"${{vars.{n}}}" for n in (*stack[stack.index(name) :], name))
            raise ReferenceProblem(
                f"variables refer to each other in a cycle: {chain}", ("vars", stack[-1])
            )
        if len(stack) >= _MAX_CHAIN:
            raise ReferenceProblem(
                f"variables refer to variables more than {_MAX_CHAIN} deep (${{vars.{name}}} "
                f"from ${{vars.{stack[0]}}})", ("vars", stack[-1]))
        value = self.walk(self._raw[name], ("vars", name), (*stack, name))
        self._done[name] = value
        return value

    def walk(self, value: Any, path: FieldPath, stack: tuple[str, ...]) -> Any:
        if len(path) > _MAX_DEPTH:
            return value
        if isinstance(value, str):
            return self.text(value, path, stack)
        if isinstance(value, dict):
            return {key: self.walk(item, (*path, key), stack) for key, item in value.items()}
        if isinstance(value, list):
            return [self.walk(item, (*path, index), stack) for index, item in enumerate(value)]
        return value

    def text(self, value: str, path: FieldPath, stack: tuple[str, ...]) -> Any:
        if "$" not in value:
            return value
        whole = _WHOLE.fullmatch(value)
        if whole:
            return copy.deepcopy(self.lookup(whole.group(1), path, stack))
        parts: list[str] = []
        last = size = 0
        for token in _TOKEN.finditer(value):
            parts.append(value[last : token.start()])
            last = token.end()
            if token.group(0) == "$${":
                # `$${host.x}` stays escaped until the host variables are filled in
                parts.append("$${" if value.startswith("host.", last) else "${")
                continue
            inner, closed = token.group(1), token.group(2)
            var = _VAR_INNER.fullmatch(inner.strip())
            if var and closed and inner == inner.strip():
                filled = _as_text(self.lookup(var.group(1), path, stack), var.group(1), path)
                size += len(filled)
                if size > _MAX_TEXT:  # 40 variables each doubling the last: a MemoryError
                    raise ReferenceProblem(
                        f"filling in variables makes this value larger than {_MAX_TEXT:,} "
                        "characters (variables that repeat each other?)", path)
                parts.append(filled)
            elif _ENV_INNER.fullmatch(inner) and closed:
                parts.append(token.group(0))
            elif _CONTROLLER.fullmatch(inner):
                parts.append(_controller(token.group(0), inner, bool(closed), path))
            else:
                _check_not_misspelt(token.group(0), inner, bool(closed), path)
                parts.append(token.group(0))
        parts.append(value[last:])
        return "".join(parts)

    def lookup(self, name: str, path: FieldPath, stack: tuple[str, ...]) -> Any:
        head, *rest = name.split(".")
        source = self._done if head in self._done else self._raw
        if head not in source:
            raise _unknown(name, self._raw or self._done, path)
        value = self.resolve(head, stack) if head not in self._done else self._done[head]
        for depth, part in enumerate(rest):
            if not isinstance(value, Mapping) or part not in value:
                prefix = ".".join([head, *rest[:depth]])
                known = sorted(value) if isinstance(value, Mapping) else []
                raise ReferenceProblem(
                    f"unknown variable ${{vars.{name}}}: vars.{prefix} has no key {part!r}",
                    path,
                    expected=f"one of: {', '.join(known)}" if known else None,
                    hint=_did_you_mean(part, [str(k) for k in known]),
                )
            value = value[part]
        return value


def _controller(token: str, inner: str, closed: bool, path: FieldPath) -> str:
    """`${controller.home}`: the home folder of the user running orch (HOME, else the
    password database), a value only this machine knows."""
    if closed and inner == "controller.home":
        home = os.path.expanduser("~")
        if home.startswith("/"):
            return home.rstrip("/") or "/"
        raise ReferenceProblem(f"{token}: the user running orch has no home folder "
                               f"(HOME is {home!r})", path, hint="set HOME to an absolute path")
    raise ReferenceProblem(
        f"{'unterminated' if not closed else 'unknown'} reference {token!r}", path,
        expected="${controller.home} (the home folder of the user running orch)",
        hint="write $${ for a literal '${'")


def _as_text(value: Any, name: str, path: FieldPath) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        raise ReferenceProblem(
            f"${{vars.{name}}} is a {'mapping' if isinstance(value, dict) else 'list'}; "
            "it can stand alone as a value but cannot be part of a longer string",
            path,
        )
    return str(value)


def _flat_names(variables: Mapping[str, Any], prefix: str = "") -> list[str]:
    names: list[str] = []
    for key, value in variables.items():
        names.append(prefix + str(key))
        if isinstance(value, Mapping):
            names.extend(_flat_names(value, f"{prefix}{key}."))
    return names


def _unknown(name: str, variables: Mapping[str, Any], path: FieldPath) -> ReferenceProblem:
    known = _flat_names(variables)
    return ReferenceProblem(
        f"unknown variable ${{vars.{name}}}",
        path,
        expected=f"a name defined under vars: ({', '.join(known)})"
        if known
        else "a name defined under vars: (there are none)",
        hint=_did_you_mean(name, known) or (None if known else "add it under `vars:` in the plan"),
    )


def _did_you_mean(word: str, options: list[str]) -> str | None:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _check_not_misspelt(token: str, inner: str, closed: bool, path: FieldPath) -> None:
    """Raise for text that looks like a vars/env reference but is not a valid one."""
    match = re.match(r"\s*(vars?|env)\s*[.:]\s*(.*)", inner, re.IGNORECASE)
    if not match:  # e.g. a shell's ${HOME}: not ours
        return
    kind, name = match.group(1).lower(), match.group(2).strip()
    if kind.startswith("var"):
        suggestion = f"${{vars.{name}}}" if name else "${vars.NAME}"
    else:
        suggestion = f"${{env:{name}}}" if name else "${env:NAME}"
    problem = "unterminated reference" if not closed else "malformed reference"
    raise ReferenceProblem(
        f"{problem} {token!r}",
        path,
        expected="${vars.NAME} (a plan variable) or ${env:NAME} (a secret from the environment)",
        hint=f"write {suggestion}; to keep a literal '${{', write '$${{'",
    )
