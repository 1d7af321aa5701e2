"""The tune space as Optuna distributions, and a candidate's values as `--set`s (pure).

A candidate is a dict axis -> value (the same shape as a matrix variant's values), so a trial
is exactly `orch apply PLAN --set AXIS=VALUE ...` and its run folder's meta.json says so.
Optuna's categorical choices are scalars: a value that is not (a list, a mapping) is given
to Optuna as its JSON text and read back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import BaseTrial

from orchestrator.plan.models.tune import Choice, Param, Range

Values = dict[str, Any]  # axis (dotted, --set syntax) -> value
_SCALAR = (str, int, float, bool, type(None))


def _encode(value: Any) -> Any:
    return value if isinstance(value, _SCALAR) else json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Space:
    params: dict[str, Param]

    def distributions(self) -> dict[str, BaseDistribution]:
        return {key: _distribution(param) for key, param in self.params.items()}

    def suggest(self, trial: BaseTrial) -> Values:
        """The values Optuna picks (or was told to try: an enqueued candidate)."""
        out: Values = {}
        for key, param in self.params.items():
            if isinstance(param, Choice):
                picked = trial.suggest_categorical(key, [_encode(v) for v in param.values])
                out[key] = next(v for v in param.values if _encode(v) == picked)
            elif param.integer:
                out[key] = trial.suggest_int(key, int(param.low), int(param.high),
                                             step=int(param.step or 1), log=param.log)
            else:
                out[key] = trial.suggest_float(key, float(param.low), float(param.high),
                                               step=param.step, log=param.log)
        return out

    def holds(self, key: str, value: Any) -> bool:
        param = self.params.get(key)
        if param is None:
            return False
        if isinstance(param, Choice):
            return any(_same(value, v) for v in param.values)
        return param.holds(value)

    def optuna_params(self, values: Values) -> dict[str, Any] | None:
        """`values` as Optuna's params (for enqueueing or recording a trial): None unless every
        axis is given a value inside its space."""
        if set(values) != set(self.params) or not all(self.holds(k, v) for k, v in values.items()):
            return None
        return {k: _encode(v) for k, v in values.items()}

    def size(self) -> int | None:
        """How many candidates the space holds; None when a range of reals makes it endless."""
        count = 1
        for param in self.params.values():
            if isinstance(param, Choice):
                count *= len(param.values)
            elif param.integer:
                count *= (int(param.high) - int(param.low)) // int(param.step or 1) + 1 \
                    if not param.log else int(param.high) - int(param.low) + 1
            else:
                return None
        return count


def _distribution(param: Param) -> BaseDistribution:
    if isinstance(param, Choice):
        return CategoricalDistribution([_encode(v) for v in param.values])
    assert isinstance(param, Range)
    if param.integer:
        return IntDistribution(int(param.low), int(param.high), log=param.log,
                               step=int(param.step or 1))
    return FloatDistribution(float(param.low), float(param.high), log=param.log, step=param.step)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def key_of(values: Values) -> str:
    """One text per candidate: two proposals of the same values are one trial."""
    return json.dumps(values, sort_keys=True)


def tune_sets(values: Values) -> list[str]:
    """The `--set` arguments of a candidate, then the plan's tune and matrix removed: the
    trial's own plan is one deployment."""
    return [f"{key}={json.dumps(value)}" for key, value in values.items()] + \
        ["tune=null", "matrix=null"]
