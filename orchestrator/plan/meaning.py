"""What a plan field means beyond its type, said on the field itself (`Annotated[..., MARK]` in
plan/models/) and read back from the model, instead of lists kept beside it:

- CONTROLLER_PATH: a file on the controller, anchored to the plan file that names it (the
  loader makes it absolute: templates, datasets, tokenizers);
- HOST_VARS: a part of the plan that reaches one host and may differ per host, where
  `${host.NAME}` may stand (plan/host_vars.py);
- makes_step("python"): the host step a section converges (compile.py builds the steps; the
  sections an install depends on are read from here: `sections_of`, used by matrix/expand.py).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

FieldPath = tuple[str | int, ...]
ANY_INDEX = "*"  # a list item or a map value, in a field pattern


@dataclass(frozen=True)
class Meaning:
    controller_path: bool = False
    host_vars: bool = False
    step: str | None = None


CONTROLLER_PATH = Meaning(controller_path=True)
HOST_VARS = Meaning(host_vars=True)


def makes_step(name: str) -> Meaning:
    return Meaning(step=name)


def sections_of(model: type[BaseModel], step: str) -> tuple[str, ...]:
    """The top-level fields of `model` that make `step` (`python` -> python, install)."""
    return tuple(name for name, info in model.model_fields.items()
                 if any(isinstance(m, Meaning) and m.step == step for m in info.metadata))


def step_of(model: type[BaseModel], path: str) -> str | None:
    """The step that converges the field at a dotted `path` (`install.packages` ->
    `python`): the innermost meaning on the way says it; None when no section makes one
    (smoke checks, benchmarks and collection run after the steps)."""
    found: str | None = None
    current: Any = model
    for part in path.split("."):
        info = current.model_fields.get(part) if isinstance(current, type) and \
            issubclass(current, BaseModel) else None
        if info is None:
            break
        found = next((m.step for m in info.metadata if isinstance(m, Meaning) and m.step),
                     found)
        inner = _models_in(info.annotation)
        current = inner[0][1] if inner and not inner[0][0] else None
    return found


def _models_in(annotation: Any) -> list[tuple[tuple[str, ...], type[BaseModel]]]:
    """The models a field's type holds, with the pattern steps to reach them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [((), annotation)]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [found for arg in args for found in _models_in(arg)]
    if origin in (list, tuple):
        return [((ANY_INDEX, *steps), model) for arg in args for steps, model in _models_in(arg)]
    if origin is dict and len(args) == 2:
        return [((ANY_INDEX, *steps), model) for steps, model in _models_in(args[1])]
    return []


@cache
def patterns(model: type[BaseModel], which: Callable[[Meaning], bool]) -> tuple[tuple[str, ...], ...]:
    """Field patterns (names, ANY_INDEX for list items) of `model` whose field carries a
    meaning `which` selects, nested models included."""
    found: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        if any(isinstance(m, Meaning) and which(m) for m in info.metadata):
            found.append((name,))
        for steps, inner in _models_in(info.annotation):
            found += [(name, *steps, *rest) for rest in patterns(inner, which)]
    return tuple(found)


def controller_path(meaning: Meaning) -> bool:
    return meaning.controller_path


def host_vars(meaning: Meaning) -> bool:
    return meaning.host_vars


def expand(data: Any, pattern: tuple[str, ...]) -> list[FieldPath]:
    """The paths in `data` (a plan as loaded, before validation) that `pattern` names."""
    if not pattern:
        return [()]
    head, rest = pattern[0], pattern[1:]
    if head == ANY_INDEX:
        items: list[tuple[str | int, Any]] = list(enumerate(data)) if isinstance(data, list) else \
            list(data.items()) if isinstance(data, dict) else []
        return [(key, *tail) for key, value in items for tail in expand(value, rest)]
    if isinstance(data, dict) and head in data:
        return [(head, *tail) for tail in expand(data[head], rest)]
    return []
