"""Human descriptions of the plan models: the reference page, the JSON Schema, and the
"expected ..." phrases of error messages. All generated from the models in `models/`.

Regenerate the committed reference with:

    python -m orchestrator.plan.docs > docs/plan-reference.md
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from orchestrator.plan.models import Plan, parse_duration

REGENERATE = "python -m orchestrator.plan.docs > docs/plan-reference.md"

_SCALARS: dict[Any, tuple[str, str, str]] = {
    # type: (label in the reference, phrase, plural phrase)
    str: ("string", "a string", "strings"),
    int: ("integer", "an integer", "integers"),
    float: ("number", "a number", "numbers"),
    bool: ("boolean", "true or false", "booleans"),
    type(None): ("null", "null", "nulls"),
    Any: ("any", "any value", "values"),
}


def _is_duration(metadata: typing.Iterable[Any]) -> bool:
    return any(isinstance(m, BeforeValidator) and m.func is parse_duration for m in metadata)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _members(annotation: Any) -> list[Any]:
    return list(get_args(annotation)) if _is_union(annotation) else [annotation]


def label(annotation: Any, metadata: typing.Iterable[Any] = ()) -> str:
    """A compact type label for the reference table: `list of string`, `duration`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        return label(inner, [*metadata, *extra])
    if _is_duration(metadata):
        return "duration"
    if _is_union(annotation):
        return " or ".join(label(member) for member in get_args(annotation))
    if origin is Literal:
        return " \\| ".join(
            f"`{json.dumps(v) if not isinstance(v, str) else v}`" for v in get_args(annotation)
        )
    if origin is list:
        return f"list of {label(get_args(annotation)[0])}"
    if origin is dict:
        return f"map of {label(get_args(annotation)[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{_anchor(annotation)})"
    return _SCALARS.get(annotation, (str(annotation), "", ""))[0]


def phrase(annotation: Any, metadata: typing.Iterable[Any] = (), *, plural: bool = False) -> str:
    """What a value of this type looks like, for "expected ..." lines: `a list of strings`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        return phrase(inner, [*metadata, *extra], plural=plural)
    if _is_duration(metadata):
        return "durations" if plural else "a duration such as 30s, 5m, 1h30m or a number of seconds"
    if _is_union(annotation):
        members = [m for m in get_args(annotation) if m is not type(None)]
        text = " or ".join(phrase(member, plural=plural) for member in members)
        return text + (" (or null)" if len(members) < len(get_args(annotation)) else "")
    if origin is Literal:
        values = ", ".join(f"`{v}`" for v in get_args(annotation))
        return f"one of {values}" if len(get_args(annotation)) > 1 else values
    if origin is list:
        return (
            f"{'lists' if plural else 'a list'} of {phrase(get_args(annotation)[0], plural=True)}"
        )
    if origin is dict:
        value = phrase(get_args(annotation)[1], plural=True)
        return f"{'mappings' if plural else 'a mapping'} of names to {value}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        keys = ", ".join(annotation.model_fields)
        return f"{'mappings' if plural else 'a mapping'} with keys {keys}"
    scalar = _SCALARS.get(annotation)
    if scalar is None:
        return str(annotation)
    return scalar[2] if plural else scalar[1]


def constraints(metadata: typing.Iterable[Any]) -> str:
    """`≥ 1`, `> 0 and < 1` from annotated-types metadata."""
    parts = []
    for item in metadata:
        for kind, symbol in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            value = getattr(item, kind, None)
            if isinstance(item, annotated_types.BaseMetadata) and value is not None:
                parts.append(f"{symbol} {value}")
    return " and ".join(parts)


def field_type(info: FieldInfo) -> tuple[Any, list[Any]]:
    """(annotation, metadata) of a model field."""
    return info.annotation, list(info.metadata)


def annotation_at(
    model: type[BaseModel], path: typing.Sequence[str | int]
) -> tuple[Any, FieldInfo | None] | None:
    """(annotation, FieldInfo or None) of the value at a data path, walking model fields,
    list items and map values; None when the path leaves the models."""
    annotation: Any = model
    info: FieldInfo | None = None
    for segment in path:
        members = [_strip(m) for m in _members(_strip(annotation))]
        if isinstance(segment, int):
            lists = [m for m in members if get_origin(m) is list]
            if not lists:
                return None
            annotation, info = get_args(lists[0])[0], None
            continue
        models = [m for m in members if _is_model(m)]
        if models:
            found = models[0].model_fields.get(segment)
            if found is None:
                return None
            annotation, info = found.annotation, found
            continue
        maps = [m for m in members if get_origin(m) is dict]
        if not maps:
            return None
        annotation, info = get_args(maps[0])[1], None
    return annotation, info


def expected_at(model: type[BaseModel], path: typing.Sequence[str | int]) -> str | None:
    """The "expected" phrase for the value at a data path."""
    found = annotation_at(model, path)
    if found is None:
        return None
    annotation, info = found
    return phrase(annotation, info.metadata if info else ())


def literal_values(model: type[BaseModel], path: typing.Sequence[str | int]) -> list[str]:
    """The allowed values of a Literal field at `path`, as text."""
    found = annotation_at(model, path)
    if found is None:
        return []
    members = [_strip(m) for m in _members(_strip(found[0]))]
    return [str(v) for m in members if get_origin(m) is Literal for v in get_args(m)]


def model_at(model: type[BaseModel], path: typing.Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the mapping at `path` (None when it is no model)."""
    found = annotation_at(model, path)
    if found is None:
        return None
    for member in _members(_strip(found[0])):
        if _is_model(_strip(member)):
            return typing.cast(type[BaseModel], _strip(member))
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def field_index(model: type[BaseModel] = Plan) -> dict[str, list[str]]:
    """Every field name -> the dotted paths where it is valid (`port` -> [`service.port`])."""
    index: dict[str, list[str]] = {}
    for path, section in sections(model):
        for name in section.model_fields:
            index.setdefault(name, []).append(f"{path}.{name}" if path else name)
    return index


def sections(model: type[BaseModel] = Plan) -> Iterator[tuple[str, type[BaseModel]]]:
    """(path, model) for the root and every nested model, in the order a plan file lists
    them (depth first), each model once."""
    seen: set[type[BaseModel]] = set()

    def visit(path: str, current: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
        if current in seen:
            return
        seen.add(current)
        yield path, current
        for name, info in current.model_fields.items():
            child = f"{path}.{name}" if path else name
            for nested, suffix in _nested_models(info.annotation):
                yield from visit(child + suffix, nested)

    yield from visit("", model)


def _nested_models(annotation: Any, suffix: str = "") -> Iterator[tuple[type[BaseModel], str]]:
    annotation = _strip(annotation)
    if _is_model(annotation):
        yield annotation, suffix
    elif _is_union(annotation):
        for member in get_args(annotation):
            yield from _nested_models(member, suffix)
    elif get_origin(annotation) is list:
        yield from _nested_models(get_args(annotation)[0], suffix + "[]")


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _format_seconds(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "(its defaults)"
        return f"`{json.dumps(value)}`"
    if info.default is PydanticUndefined:
        return "**required**"
    if _is_duration(info.metadata) or any(
        _is_duration(get_args(m)[1:])
        for m in _members(info.annotation)
        if get_origin(m) is Annotated
    ):
        return "`null`" if info.default is None else f"`{_format_seconds(float(info.default))}`"
    if isinstance(info.default, str):
        return f"`{info.default}`" if info.default else '`""`'
    return f"`{json.dumps(info.default)}`"


def _type_cell(info: FieldInfo) -> str:
    text = label(info.annotation, info.metadata)
    bounds = constraints(info.metadata)
    return f"{text} ({bounds})" if bounds else text


def render_reference() -> str:
    """The plan reference as markdown (docs/plan-reference.md)."""
    out = [
        "# Plan reference",
        "",
        f"<!-- Generated from orchestrator/plan/models/ by `{REGENERATE}`. Do not edit. -->",
        "",
        "Every key a plan file may hold, section by section. Unknown keys are errors. Strings may",
        "use `${vars.NAME}` (filled in from `vars:` when the plan is loaded) and `${env:NAME}` (a",
        "secret read from the controller's environment at run time, never written anywhere).",
        "Durations are written `30s`, `5m`, `1h30m`, `500ms` or as a number of seconds, at most",
        "30 days. An integer is written as one (`8000`, not `true` or `'8000'`), a yes/no as",
        "`true` or `false` (not `'yes'`).",
        "How to write plans, layer them and set values from the command line: [plans.md](plans.md).",
        "",
    ]
    for path, model in sections():
        title = f"`{path}`" if path else "Top level"
        out += [f'<a id="{_anchor(model)}"></a>', "", f"## {title} ({model.__name__})", ""]
        if model.__doc__:
            out += [" ".join(model.__doc__.split()), ""]
        out += ["| Key | Type | Default | Description |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            if info.exclude:
                continue
            description = " ".join((info.description or "").split()).replace("|", "\\|")
            out.append(f"| `{name}` | {_type_cell(info)} | {_default(info)} | {description} |")
        out.append("")
    return "\n".join(out)


# A string that is exactly one variable reference takes the variable's type after merging.
_VAR_REF = {"type": "string", "pattern": r"^\$\{vars\.[A-Za-z_][A-Za-z0-9_]*\}$"}
_SHOWN = ("title", "description", "default")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a plan file, any layer of one (for editors: see docs/plans.md).

    A layer may leave out what another sets (nothing is required), delete an inherited key
    with `null`, and put `${vars.NAME}` where a number or boolean goes; unknown keys and
    wrong types are still errors. Draft 7, which every YAML language server reads: pydantic's
    `$defs` become `definitions`."""
    schema = _layer(Plan.model_json_schema(ref_template="#/definitions/{model}"))
    schema["definitions"] = {name: _layer(part) for name, part in schema.pop("$defs", {}).items()}
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema, "title": "orch plan"}


def _layer(node: dict[str, Any]) -> dict[str, Any]:
    """An object schema as a layer sees it: no required keys; each property may also be null
    or a variable reference."""
    node = dict(node)
    node.pop("required", None)
    properties = node.get("properties")
    if isinstance(properties, dict):
        node["properties"] = {name: _loose(part) for name, part in properties.items()}
    return node


def _loose(part: dict[str, Any]) -> dict[str, Any]:
    shown = {key: part[key] for key in _SHOWN if key in part}
    inner = {key: value for key, value in part.items() if key not in _SHOWN}
    if isinstance(inner.get("additionalProperties"), dict):  # a map (env:, args:): null deletes
        inner["additionalProperties"] = _loose(inner["additionalProperties"])
    return {**shown, "anyOf": [inner, {"type": "null"}, _VAR_REF]}


if __name__ == "__main__":
    print(render_reference(), end="")
