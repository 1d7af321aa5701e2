"""The `matrix:` section of a plan: its shape, checked where the plan is loaded (pure).

    matrix:
      service.args.max-num-seqs: [64, 128, 256]     # an axis: a plan path in --set syntax
      service.args.kv-cache-dtype: [fp8, auto]      # and the values it takes
      exclude:
        - {service.args.max-num-seqs: 256, service.args.kv-cache-dtype: auto}
      include:
        - {service.args.max-num-seqs: 512, service.args.kv-cache-dtype: fp8}
      objective: p99 TTFT <= 2s at C >= 64

An axis may also be written nested (`service: {args: {max-num-seqs: [...]}}`, which is what
`--set matrix.service.args.max-num-seqs=[64,128]` makes): a mapping is a level of the path,
a list is the values. The variants, each a whole plan, are made by `matrix/expand.py`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.errors import PlanError
from orchestrator.plan.layers import parse_set
from orchestrator.plan.models.objective import EXAMPLE, ObjectiveError, parse_objective

NOT_AXES = ("name", "matrix", "extends")  # the variants of a matrix share its name
MAX_VARIANTS = 256


class MatrixShapeError(ValueError):
    """A problem of part of the section: `at` is the path below `matrix` (the loader points
    at it; see validation.py)."""

    def __init__(self, message: str, *, at: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.at = at


def _segment(key: str) -> str:
    return f'"{key}"' if "." in key else key


def canonical(key: str) -> tuple[str, ...]:
    """An axis key as path segments (quotes honoured): `service.args.max-num-seqs`."""
    try:
        segments, _ = parse_set(f"{key}=0")
    except PlanError as error:
        raise ValueError(error.message) from None
    return tuple(segments)


def dotted_key(segments: tuple[str, ...]) -> str:
    return ".".join(_segment(s) for s in segments)


def _flatten(value: Any, prefix: tuple[str, ...], at: tuple[str | int, ...],
             out: dict[tuple[str, ...], tuple[list[Any], tuple[str | int, ...]]]) -> None:
    if isinstance(value, dict):
        if not value:
            raise MatrixShapeError("an axis needs a list of values, got an empty mapping", at=at)
        for key, item in value.items():
            _flatten(item, (*prefix, str(key)), (*at, str(key)), out)
        return
    if not isinstance(value, list) or not value:
        raise MatrixShapeError(
            f"an axis takes a non-empty list of values, got {json.dumps(value, default=str)}",
            at=at)
    seen: list[str] = []
    for index, item in enumerate(value):
        shown = json.dumps(item, sort_keys=True, default=str)
        if shown in seen:
            raise MatrixShapeError(f"the value {shown} is given twice", at=(*at, index))
        seen.append(shown)
    if prefix in out:
        raise MatrixShapeError(f"the axis {dotted_key(prefix)} is given twice (once nested, "
                               "once dotted)", at=at)
    out[prefix] = (value, at)


class Matrix(BaseModel):
    """Variants of the plan, each applied and benchmarked as its own run: every other key is
    an axis, a plan path in `--set` syntax (`service.args.max-num-seqs`,
    `env.VLLM_ATTENTION_BACKEND`, `vars.vllm_version`) with the list of values it takes; the
    variants are the product of the axes. See docs/plans.md, "Matrix sweeps"."""

    model_config = ConfigDict(extra="allow")

    include: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Extra combinations: an entry adds its values to the variants that match "
                    "its axis values, or is a variant of its own when it matches none.")
    exclude: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Combinations left out: a variant matching every value of an entry.")
    objective: str | None = Field(
        None,
        description=f"What `orch compare` calls best, e.g. `{EXAMPLE}`: the most output "
                    "tok/s (per GPU) at a level meeting it (else the plan's bench.slo "
                    "goodput, else the peak).")

    def axes(self) -> dict[tuple[str, ...], list[Any]]:
        """Axis path -> its values, in the order written."""
        return {path: values for path, (values, _) in self._axes().items()}

    def _axes(self) -> dict[tuple[str, ...], tuple[list[Any], tuple[str | int, ...]]]:
        out: dict[tuple[str, ...], tuple[list[Any], tuple[str | int, ...]]] = {}
        for key, value in (self.model_extra or {}).items():
            try:
                path = canonical(key)
            except ValueError as error:
                raise MatrixShapeError(f"{key!r} is not a plan path: {error}", at=(key,)) \
                    from None
            if path[0] in NOT_AXES:
                raise MatrixShapeError(
                    f"{path[0]} cannot vary in a matrix: its variants share the plan's "
                    f"{'name (one run folder per variant under it)' if path[0] == 'name' else path[0]}",
                    at=(key,))
            _flatten(value, path, (key,), out)
        return out

    @model_validator(mode="after")
    def _shape(self) -> Matrix:
        axes = self._axes()
        if not axes and not self.include:
            raise MatrixShapeError("a matrix needs at least one axis, e.g. "
                                   "`service.args.max-num-seqs: [64, 128]`")
        for kind in ("exclude", "include"):
            for index, entry in enumerate(getattr(self, kind)):
                if not entry:
                    raise MatrixShapeError(f"an {kind} entry names no value", at=(kind, index))
                for key in entry:
                    try:
                        path = canonical(key)
                    except ValueError as error:
                        raise MatrixShapeError(f"{key!r} is not a plan path: {error}",
                                               at=(kind, index, key)) from None
                    if kind == "exclude" and path not in axes:
                        names = ", ".join(dotted_key(a) for a in axes) or "none"
                        raise MatrixShapeError(f"{key} is not an axis of the matrix (its axes: "
                                               f"{names})", at=(kind, index, key))
                    if path[0] in NOT_AXES:
                        raise MatrixShapeError(f"{path[0]} cannot vary in a matrix",
                                               at=(kind, index, key))
        if self.objective is not None:
            try:
                parse_objective(self.objective)
            except ObjectiveError as error:
                raise MatrixShapeError(f"{error}; for example `{EXAMPLE}`",
                                       at=("objective",)) from None
        return self
