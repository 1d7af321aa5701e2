"""The `tune:` section of a plan: the space `orch tune` searches, checked where the plan is
loaded (pure).

    tune:
      service.args.max-num-seqs: {low: 32, high: 512, log: true}   # a range (integers here)
      service.args.max-num-batched-tokens: {low: 4096, high: 16384, step: 4096}
      service.args.kv-cache-dtype: [fp8, auto]                     # a list: its values
      vars.model: [kimi-int4, kimi-nvfp4]                          # a pivot (a new install)
      slo: p99_ttft<=2s,p99_tpot<=60ms                             # --slo's default
      objective: output_throughput                                 # --objective's default

An axis is a plan path in `--set` syntax as in `matrix:` (plan/models/matrix.py); written nested, a
mapping without `low`/`high` is a level of the path. A range of integers is searched over
integers, one with a float bound over reals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.plan.models.matrix import MatrixShapeError, canonical, dotted_key
from orchestrator.plan.models.slo import EXAMPLE, SloError, parse_objective_metric, parse_slo

NOT_AXES = ("name", "matrix", "extends", "tune")
RANGE_KEYS = {"low", "high", "step", "log"}


@dataclass(frozen=True)
class Choice:
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    step: float | None = None
    log: bool = False

    @property
    def integer(self) -> bool:
        numbers = (self.low, self.high) + ((self.step,) if self.step is not None else ())
        return all(isinstance(n, int) and not isinstance(n, bool) for n in numbers)

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not self.low <= value <= self.high:
            return False
        return self.step is None or abs((value - self.low) / self.step
                                        - round((value - self.low) / self.step)) < 1e-9


Param = Choice | Range


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _range(raw: dict[str, Any], at: tuple[str | int, ...]) -> Range:
    unknown = sorted(set(raw) - RANGE_KEYS)
    if unknown:
        raise MatrixShapeError(f"a range takes low, high, step and log; not {unknown[0]}",
                               at=(*at, unknown[0]))
    for key in ("low", "high"):
        if not _number(raw.get(key)):
            raise MatrixShapeError(f"a range needs a number for {key}, got "
                                   f"{json.dumps(raw.get(key), default=str)}", at=(*at, key))
    low, high, step, log = raw["low"], raw["high"], raw.get("step"), raw.get("log", False)
    if not isinstance(log, bool):
        raise MatrixShapeError("log is true or false", at=(*at, "log"))
    if low >= high:
        raise MatrixShapeError(f"low ({low}) must be below high ({high})", at=at)
    if step is not None and (not _number(step) or step <= 0):
        raise MatrixShapeError(f"step must be a number above 0, got {step!r}", at=(*at, "step"))
    if step is not None and log:
        raise MatrixShapeError("a range is stepped or logarithmic, not both", at=at)
    if log and low <= 0:
        raise MatrixShapeError(f"a logarithmic range starts above 0, not at {low}", at=(*at, "low"))
    return Range(low, high, step, log)


def _flatten(value: Any, prefix: tuple[str, ...], at: tuple[str | int, ...],
             out: dict[tuple[str, ...], Param]) -> None:
    if isinstance(value, dict) and RANGE_KEYS & set(value):
        out[prefix] = _range(value, at)
        return
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, (*prefix, str(key)), (*at, str(key)), out)
        return
    if not isinstance(value, list) or not value:
        raise MatrixShapeError("an axis takes a non-empty list of values or a range "
                               "{low, high[, step | log: true]}, got "
                               f"{json.dumps(value, default=str)}", at=at)
    shown = [json.dumps(v, sort_keys=True, default=str) for v in value]
    twice = next((i for i, s in enumerate(shown) if s in shown[:i]), None)
    if twice is not None:
        raise MatrixShapeError(f"the value {shown[twice]} is given twice", at=(*at, twice))
    if prefix in out:
        raise MatrixShapeError(f"the axis {dotted_key(prefix)} is given twice", at=at)
    out[prefix] = Choice(tuple(value))


class Tune(BaseModel):
    """What `orch tune` searches: every other key is an axis, a plan path in `--set` syntax
    with a list of values or a range `{low, high[, step | log: true]}` (docs/tune.md)."""

    model_config = ConfigDict(extra="allow")

    slo: str | None = Field(None, description=f"The SLO every trial is held to, e.g. `{EXAMPLE}` "
                                              "(--slo overrides it).")
    objective: str | None = Field(None, description="The throughput to maximise at a level "
                                                    "meeting the SLO (default output_throughput).")

    def params(self) -> dict[str, Param]:
        """Axis (dotted, --set syntax) -> its values or range, in the order written."""
        out: dict[tuple[str, ...], Param] = {}
        for key, value in (self.model_extra or {}).items():
            try:
                path = canonical(key)
            except ValueError as error:
                raise MatrixShapeError(f"{key!r} is not a plan path: {error}", at=(key,)) from None
            if path[0] in NOT_AXES:
                raise MatrixShapeError(f"{path[0]} cannot be tuned", at=(key,))
            _flatten(value, path, (key,), out)
        return {dotted_key(path): param for path, param in out.items()}

    @model_validator(mode="after")
    def _shape(self) -> Tune:
        if not self.params():
            raise MatrixShapeError("a tune: section needs at least one axis, e.g. "
                                   "`service.args.max-num-seqs: {low: 32, high: 512, log: true}`")
        for key, read in (("slo", parse_slo), ("objective", parse_objective_metric)):
            text = getattr(self, key)
            if text is not None:
                try:
                    read(text)
                except SloError as error:
                    raise MatrixShapeError(str(error), at=(key,)) from None
        return self
