"""Layering of plan data: pure functions, no I/O.

A plan is the merge of its layers, lowest first: the `extends:` chain, the plan file, each
`-f` overlay, then each `--set`. Rules:

- maps deep-merge; lists and scalars replace; the last layer wins;
- `null` deletes: a key set to `null` in a layer removes that key from what the layers below
  set, so the field falls back to its default (`env: {HF_TOKEN: null}` drops an inherited
  variable). Inside lists, `null` is kept as a value.

`--set PATH=VALUE` sets one value: PATH is dotted (`service.port`), a segment may be quoted to
hold dots (`service.args."compilation-config.mode"`), and a number indexes an existing list
item (`smoke.0.max_tokens`). VALUE is read as YAML (`8001` is an integer, `[1, 2]` a list,
`null` deletes, an empty value is the empty string).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import yaml

from orchestrator.errors import PlanError
from orchestrator.plan.source import FieldPath, arg_snippet, kind_of

T = TypeVar("T")


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` merged over `base`: maps deep-merge, lists and scalars replace, `null`
    deletes the key. Neither input is modified."""
    result: dict[str, Any] = {key: copy.deepcopy(value) for key, value in base.items()}
    for key, value in override.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            below = result.get(key)
            result[key] = merge(below if isinstance(below, Mapping) else {}, value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def dotted(data: Any, prefix: str = "") -> dict[str, Any]:
    """A plan's leaves by dotted path (`bench.max_tokens`), lists as whole values; an empty
    map has none (so `{}` and a map of keys compare key by key)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(dotted(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def set_argument(text: str) -> str:
    """How a `--set` argument is named in messages and origins."""
    return f"--set {text}"


def parse_set(text: str) -> tuple[list[str], Any]:
    """'a.b=c' -> (['a', 'b'], 'c'), the value read as a YAML scalar or flow collection."""
    name = set_argument(text)
    path, index = _set_path(text, name)
    raw = text[index + 1 :]
    if raw.strip() == "":
        return path, ""
    return path, _set_value(raw, name, 6 + index + 1)


def _set_path(text: str, name: str) -> tuple[list[str], int]:
    """The dotted path before '=' (a segment may be quoted) and where the '=' is."""
    path: list[str] = []
    segment: list[str] = []
    index = 0
    quoted_segment = False
    while index < len(text) and text[index] != "=":
        char = text[index]
        if char == '"' and not segment:
            end = text.find('"', index + 1)
            if end < 0:
                raise _set_error(name, "unterminated quote in the path", 6 + index)
            segment.append(text[index + 1 : end])
            quoted_segment = True
            index = end + 1
            if index < len(text) and text[index] not in ".=":
                raise _set_error(name, "a quoted segment must end at '.' or '='", 6 + index)
            continue
        if char == ".":
            if not segment and not quoted_segment:
                raise _set_error(name, "empty segment in the path", 6 + index)
            path.append("".join(segment))
            segment, quoted_segment = [], False
        else:
            segment.append(char)
        index += 1
    if index >= len(text):
        raise _set_error(
            name,
            "expected PATH=VALUE, e.g. --set service.port=8001",
            len(name),
            expected="PATH=VALUE",
        )
    if not segment and not quoted_segment:
        raise _set_error(name, "empty segment in the path", 6 + index)
    path.append("".join(segment))
    return path, index


def _set_value(raw: str, name: str, column: int) -> Any:
    """The value after '=', read as YAML; too deep or binary is an error at `column`."""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise _set_error(name, f"the value is not valid YAML: {problem}", column) from None
    except RecursionError:  # `[[[[...]]]]` 60,000 deep: PyYAML's parser recurses
        value = None
        deep = True
    else:
        deep = _deeper_than(value, MAX_SET_DEPTH)
    if deep:
        raise _set_error(name, f"the value nests deeper than {MAX_SET_DEPTH} levels", column)
    if _holds_bytes(value):
        raise _set_error(name, "a !!binary value cannot stand in a plan: write it as text",
                         column)
    return value


MAX_SET_DEPTH = 64  # as a plan file's own nesting


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and maps nest deeper than `limit` (iteratively: no recursion to blow)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        level = [item for node in level if isinstance(node, list | dict)
                 for item in (node.values() if isinstance(node, dict) else node)]
        if not level:
            return False
    return True


def _holds_bytes(value: Any) -> bool:
    """Whether a `!!binary` value stands anywhere in `value` (bounded by MAX_SET_DEPTH)."""
    if isinstance(value, bytes):
        return True
    if isinstance(value, dict):
        return any(_holds_bytes(item) for item in value.values())
    return isinstance(value, list) and any(_holds_bytes(item) for item in value)


def apply_set(
    data: Mapping[str, Any], path: list[str], value: Any, *, argument: str
) -> tuple[dict[str, Any], FieldPath]:
    """`data` with `value` set at `path` (pure), and the path with list indices as integers.
    A map value merges like a layer; `null` deletes; a numeric segment indexes an existing
    list item. `argument` names the --set in errors."""
    result = copy.deepcopy(dict(data))
    node: Any = result
    field_path: list[str | int] = []
    for depth, segment in enumerate(path[:-1]):
        where = ".".join(path[: depth + 1])
        if isinstance(node, dict):
            child = node.get(segment)
            if child is None:
                if value is None:  # deleting below something that is not there: nothing to do
                    return result, (*field_path, *path[depth:])
                child = node[segment] = {}
            elif not isinstance(child, dict | list):
                raise _set_error(
                    argument,
                    f"{where} is {_kind(child)}, so it has no field {path[depth + 1]!r}",
                    6,
                )
            node = child
            field_path.append(segment)
        else:
            position = _list_index(node, segment, where, argument)
            node = node[position]
            field_path.append(position)
            if not isinstance(node, dict | list):
                raise _set_error(argument, f"{where} is {_kind(node)}, not a mapping or list", 6)
    last = path[-1]
    where = ".".join(path)
    if isinstance(node, list):
        position = _list_index(node, last, where, argument)
        below = node[position]
        both_maps = isinstance(below, dict) and isinstance(value, dict)
        node[position] = merge(below, value) if both_maps else value
        return result, (*field_path, position)
    if value is None:
        node.pop(last, None)
    elif isinstance(value, dict):
        below = node.get(last)
        node[last] = merge(below if isinstance(below, dict) else {}, value)
    else:
        node[last] = value
    return result, (*field_path, last)


def _list_index(items: list[Any], segment: str, where: str, argument: str) -> int:
    if not segment.isdigit():
        raise _set_error(
            argument, f"{where.rsplit('.', 1)[0]} is a list; index it with a number, e.g. .0", 6
        )
    position = int(segment)
    if position >= len(items):
        raise _set_error(
            argument,
            f"{where}: index {position} is out of range (the list has {len(items)} items)",
            6,
            hint="--set can change existing items; to replace a whole list, set it: --set a.b=[x, y]",
        )
    return position


def _kind(value: Any) -> str:
    return kind_of(value)


def _set_error(
    argument: str,
    message: str,
    offset: int,
    *,
    expected: str | None = None,
    hint: str | None = None,
) -> PlanError:
    return PlanError(
        message, file=argument, expected=expected, snippet=arg_snippet(argument, offset), hint=hint
    )


def update_origins(
    origins: dict[FieldPath, T],
    below: Any,
    path: FieldPath,
    value: Any,
    origin_of: Callable[[FieldPath], T | None],
) -> dict[FieldPath, T]:
    """The origins after a layer set `value` at `path` over `below` (the merged value there
    before). Follows `merge`: a map keeps the origins of keys it does not mention, anything
    else replaces the whole subtree, `null` removes it."""
    out = dict(origins)
    _visit(out, below, path, value, origin_of)
    return out


def _visit(
    out: dict[FieldPath, T],
    below: Any,
    path: FieldPath,
    value: Any,
    origin_of: Callable[[FieldPath], T | None],
) -> None:
    if value is None:
        _drop(out, path, inclusive=True)
        return
    if isinstance(value, Mapping):
        if not isinstance(below, Mapping):
            _drop(out, path, inclusive=False)
        _assign(out, path, origin_of)
        for key, item in value.items():
            inner = below.get(key) if isinstance(below, Mapping) else None
            _visit(out, inner, (*path, key), item, origin_of)
        return
    if isinstance(below, Mapping | list):
        _drop(out, path, inclusive=False)
    _assign(out, path, origin_of)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if item is None:  # null inside a list is a value, not a deletion
                _assign(out, (*path, index), origin_of)
            else:
                _visit(out, None, (*path, index), item, origin_of)


def _assign(
    out: dict[FieldPath, T], path: FieldPath, origin_of: Callable[[FieldPath], T | None]
) -> None:
    origin = origin_of(path)
    if origin is not None:
        out[path] = origin


def _drop(out: dict[FieldPath, T], path: FieldPath, *, inclusive: bool) -> None:
    size = len(path)
    for key in [k for k in out if len(k) > size and k[:size] == path]:
        del out[key]
    if inclusive:
        out.pop(path, None)


def get_path(data: Any, path: FieldPath) -> tuple[bool, Any]:
    """(True, value) when `path` exists in `data`, else (False, None)."""
    node = data
    for segment in path:
        found, node = child(node, segment)
        if not found:
            return False, None
    return True, node


def child(node: Any, segment: str | int) -> tuple[bool, Any]:
    """(True, node[segment]) when `segment` is a key of a map or an index of a list."""
    if isinstance(node, Mapping) and isinstance(segment, str) and segment in node:
        return True, node[segment]
    if isinstance(node, list) and isinstance(segment, int) and 0 <= segment < len(node):
        return True, node[segment]
    return False, None
