"""Validate merged YAML data with a pydantic model and turn every failure into one positioned
PlanError: file, line and column of the layer that set the value, the field path, what was
expected, the source line with a caret, and a "did you mean" hint for misspelt keys.

Pydantic reports an error `loc` that mixes data keys with union member tags
(`('hosts', 'list[str]')`); we walk the loc over the data to recover the data path and
describe a union failure once, from the field's type, instead of once per member.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from orchestrator.errors import PlanError
from orchestrator.plan.layers import child, get_path
from orchestrator.plan.source import FieldPath, Origin, arg_snippet, dotted, kind_of, snippet

M = TypeVar("M", bound=BaseModel)


@dataclass
class Positions:
    """Where every path of the merged data came from."""

    keys: dict[FieldPath, Origin]
    values: dict[FieldPath, Origin]
    texts: dict[str, str]  # layer name -> file text (files only)
    order: list[str] = field(default_factory=list)  # layer names, lowest first
    root: Origin | None = None
    via_vars: dict[FieldPath, str] = field(default_factory=dict)  # path -> NAME of `${vars.NAME}`
    deleted: dict[FieldPath, Origin] = field(default_factory=dict)  # removed by `--set X=null`

    def locate(self, path: FieldPath, *, key: bool = False) -> Origin | None:
        """The origin of `path`'s key (or value), falling back to its nearest ancestor."""
        table = self.keys if key else self.values
        for size in range(len(path), 0, -1):
            found = table.get(path[:size])
            if found is not None:
                return found
        return self.root or table.get(())


@dataclass
class Problem:
    path: FieldPath
    message: str
    origin: Origin | None
    expected: str | None = None
    hint: str | None = None
    # Start the message with the field path ("service.port: expected ..."); unknown and
    # missing keys name the key in their message already.
    name_field: bool = True

    @property
    def headline(self) -> str:
        if self.name_field and self.path:
            return f"{dotted(self.path)}: {self.message}"
        return self.message


class PlanProblems(PlanError):
    """A PlanError that also lists the further problems found in the same plan."""

    def __init__(self, first: PlanError, more: Sequence[str]) -> None:
        super().__init__(
            first.message,
            file=first.file,
            line=first.line,
            column=first.column,
            field=first.field,
            expected=first.expected,
            snippet=first.snippet,
            hint=first.hint,
        )
        self.more = list(more)

    def __str__(self) -> str:
        text = super().__str__()
        if not self.more:
            return text
        return (
            text
            + f"\n  {len(self.more)} more problem(s):\n"
            + "\n".join(f"    {m}" for m in self.more)
        )


def validate(model: type[M], data: Any, positions: Positions) -> M:
    """`model` validated from `data`, or a PlanError pointing at the first problem."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = problems_from(error, model, data, positions)
        raise as_plan_error(problems, positions) from None


def problem_error(problem: Problem, positions: Positions) -> PlanError:
    """One problem as a PlanError with its snippet."""
    origin = problem.origin
    text = positions.texts.get(origin.layer) if origin else None
    shown = ""
    if origin is not None and origin.line is not None and text is not None:
        shown = snippet(text, origin.line, origin.column or 1)
    elif origin is not None and origin.line is None and origin.column is not None:
        shown = arg_snippet(origin.layer, origin.column)
    return PlanError(
        problem.headline,
        file=origin.layer if origin else None,
        line=origin.line if origin else None,
        column=origin.column if origin and origin.line is not None else None,
        field=dotted(problem.path) or None,
        expected=problem.expected,
        snippet=shown or None,
        hint=problem.hint,
    )


def as_plan_error(problems: list[Problem], positions: Positions) -> PlanError:
    def order(problem: Problem) -> tuple[int, int, int]:
        origin = problem.origin
        if origin is None:
            return (len(positions.order), 0, 0)
        layer = positions.order.index(origin.layer) if origin.layer in positions.order else -1
        return (layer, origin.line or 0, origin.column or 0)

    problems = sorted(problems, key=order)
    first = problem_error(problems[0], positions)
    more = []
    for problem in problems[1:]:
        where = str(problem.origin) if problem.origin else "<plan>"
        if problem.origin and problem.origin.line is not None and problem.origin.column:
            where += f":{problem.origin.column}"
        more.append(f"{where}: {problem.headline}")
    return PlanProblems(first, more) if more else first


def problems_from(
    error: ValidationError, model: type[BaseModel], data: Any, positions: Positions
) -> list[Problem]:
    """One Problem per failing data path (union member failures folded into one)."""
    groups: dict[FieldPath, list[dict[str, Any]]] = {}
    unions: set[FieldPath] = set()
    for item in error.errors(include_url=False):
        path, tagged = _data_path(item["loc"], data, item["type"])
        groups.setdefault(path, []).append(dict(item))
        if tagged:
            unions.add(path)
    problems = []
    for path, items in groups.items():
        if path in unions:
            problems.append(_union_problem(model, data, path, positions))
        else:
            problems.append(_problem(model, path, items[0], positions))
    return problems


def _data_path(loc: tuple[int | str, ...], data: Any, kind: str) -> tuple[FieldPath, bool]:
    """The data path of an error loc, and whether a union member tag cut it short."""
    path: list[str | int] = []
    node = data
    for index, segment in enumerate(loc):
        found, inner = child(node, segment)
        if found:
            node = inner
        elif not (kind == "missing" and index == len(loc) - 1):
            return tuple(path), True
        path.append(segment)
    return tuple(path), False


def _union_problem(
    model: type[BaseModel], data: Any, path: FieldPath, positions: Positions
) -> Problem:
    # the schema's reader only for a plan that is wrong (start-up time)
    from orchestrator.plan.docs import expected_at

    _, value = get_path(data, path)
    expected = expected_at(model, path) or "a different kind of value"
    return Problem(
        path,
        f"expected {expected}, got {kind_of(value)}",
        positions.locate(path),
        expected=expected,
    )


def _problem(
    model: type[BaseModel], path: FieldPath, item: dict[str, Any], positions: Positions
) -> Problem:
    """The problem one pydantic error stands for, worded by its kind."""
    kind: str = item["type"]
    if kind == "extra_forbidden":
        return _unknown_key(model, path, positions)
    if kind == "missing":
        return _missing_key(model, path, positions)
    if kind in ("value_error", "assertion_error"):
        return _validator_problem(model, path, item, positions)
    if kind == "literal_error":
        return _literal_problem(model, path, item, positions)
    return _value_problem(model, path, item, positions)


def _where(parent: FieldPath) -> str:
    return f"in {dotted(parent)}" if parent else "at the top level"


def _unknown_key(model: type[BaseModel], path: FieldPath, positions: Positions) -> Problem:
    """A key the model does not have: the nearest known key, or where the key belongs."""
    # the schema's reader only for a plan that is wrong (start-up time)
    from orchestrator.plan.docs import field_index, model_at

    name = path[-1] if path else ""
    parent = path[:-1]
    section = model_at(model, parent)
    known = list(section.model_fields) if section else []
    hint = _did_you_mean(str(name), known)
    if hint is None:
        elsewhere = [p for p in field_index(model).get(str(name), []) if p != dotted(path)]
        if elsewhere:
            hint = f"{name!r} belongs elsewhere: {', '.join(elsewhere)}"
    return Problem(
        path,
        f"unknown key {name!r} {_where(parent)}",
        positions.locate(path, key=True),
        expected=f"one of: {', '.join(known)}" if known else None,
        hint=hint,
        name_field=False,
    )


def _missing_key(model: type[BaseModel], path: FieldPath, positions: Positions) -> Problem:
    """A required key that no layer sets (or that a `--set X=null` deleted)."""
    # the schema's reader only for a plan that is wrong (start-up time)
    from orchestrator.plan.docs import expected_at

    name = path[-1] if path else ""
    parent = path[:-1]
    expected = expected_at(model, path)
    deleted = positions.deleted.get(path)
    supplier = positions.deleted.get(("model",)) if path == ("service", "model") else None
    return Problem(
        path,
        f"missing required key {name!r} {_where(parent)}"
        + (f" (deleted by {deleted})" if deleted is not None else "")
        + (f" (the plan's `model:` section names it; {supplier} deleted that section)"
           if supplier is not None else ""),
        deleted or supplier or positions.locate(parent, key=True),
        expected=f"{name}: {expected}" if expected else None,
        hint="set what the server loads too: --set service.model=DIR_OR_REPO"
        if supplier is not None else None,
        name_field=False,
    )


def _validator_problem(
    model: type[BaseModel], path: FieldPath, item: dict[str, Any], positions: Positions
) -> Problem:
    """A model validator's own error, at the path it names (its `at`) below `path`."""
    cause = (item.get("ctx") or {}).get("error")
    at: FieldPath = tuple(getattr(cause, "at", ()) or ())
    message = str(cause) if cause is not None else item["msg"]
    return Problem(
        (*path, *at),
        message,
        positions.locate((*path, *at)),
        expected=_described(model, path, (*path, *at)) if path else None,
    )


def _literal_problem(
    model: type[BaseModel], path: FieldPath, item: dict[str, Any], positions: Positions
) -> Problem:
    # the schema's reader only for a plan that is wrong (start-up time)
    from orchestrator.plan.docs import expected_at, literal_values

    return Problem(
        path,
        f"{kind_of(item['input'])} is not one of the allowed values",
        positions.locate(path),
        expected=expected_at(model, path),
        hint=_did_you_mean(str(item["input"]), literal_values(model, path)),
    )


def _value_problem(
    model: type[BaseModel], path: FieldPath, item: dict[str, Any], positions: Positions
) -> Problem:
    """A value of the wrong type, or one its field refuses."""
    # the schema's reader only for a plan that is wrong (start-up time)
    from orchestrator.plan.docs import expected_at

    kind: str = item["type"]
    expected = expected_at(model, path)
    message = item["msg"]
    value = item["input"]
    hint = None
    if kind.endswith(("_type", "_parsing")):
        message = f"expected {expected or message}, got {kind_of(value)}"
        if kind == "string_type" and isinstance(value, int | float):
            hint = _quote_hint(value, path, positions)
    else:
        message = f"{_lower_first(message)}, got {kind_of(value)}"
    return Problem(path, message, positions.locate(path), expected=expected, hint=hint)


def _quote_hint(value: int | float, path: FieldPath, positions: Positions) -> str:
    """A number where text is expected: say where to quote it."""
    var = positions.via_vars.get(path)
    if var is None:
        return f'quote it: "{_yaml_text(value)}" (YAML reads it as a {type(value).__name__})'
    # the number came from elsewhere: say where to quote it
    return (f"the value comes from ${{vars.{var}}}, set by "
            f"{positions.locate(('vars', var))}, where YAML read it as the "
            f"{type(value).__name__} {_yaml_text(value)}: quote it there")


def _yaml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _described(model: type[BaseModel], top: FieldPath, path: FieldPath) -> str | None:
    """The description of the nearest described field from `path` up to `top`."""
    # the schema's reader only for a plan that is wrong (start-up time)
    from orchestrator.plan.docs import annotation_at, expected_at

    for size in range(len(path), len(top) - 1, -1):
        found = annotation_at(model, path[:size])
        if found and found[1] is not None and found[1].description:
            return found[1].description
    return expected_at(model, path)


def _lower_first(text: str) -> str:
    text = text.removeprefix("Input ")
    return text[:1].lower() + text[1:]


def _did_you_mean(word: str, options: list[str]) -> str | None:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not close:
        close = [o for o in options if o.replace("_", "-") == word.replace("_", "-").lower()]
    return f"did you mean {close[0]!r}?" if close else None
