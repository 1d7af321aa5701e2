"""A matrix's objective, as written in a plan: `p99 TTFT <= 2s at C >= 64` (pure).

    OBJECTIVE := CONDITION ("and" CONDITION)* ["at" "C" OP NUMBER]
    CONDITION := STAT METRIC OP NUMBER[UNIT]    e.g. p99 TTFT <= 2s, mean ITL < 50ms
    STAT      := mean | median | pNN            (p99, p99.9)
    METRIC    := ttft | tpot | itl | e2el | latency (= e2el)
    UNIT      := ms (the default) | s

A level meets the objective when every condition holds at it and its concurrency is within
the `at` range; the best variant of a matrix is the one whose qualifying levels reach the most
output tokens per second (per GPU when the GPUs are known).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.metrics import LATENCIES, stat_key

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "=": operator.eq,
    "==": operator.eq,
}
_ALIASES = {"latency": "e2el", "e2e": "e2el"}
_METRICS = {m.name: m for m in LATENCIES}
_CONDITION = re.compile(
    r"^(?P<stat>mean|median|p\d+(?:\.\d+)?)\s+(?P<metric>[a-z_0-9]+)\s*(?P<op><=|>=|==|<|>|=)\s*"
    r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?$")
_AT = re.compile(r"^c\s*(?P<op><=|>=|==|<|>|=)\s*(?P<value>\d+)$")
EXAMPLE = "p99 TTFT <= 2s at C >= 64"


class ObjectiveError(ValueError):
    """What is wrong with an objective's text."""


@dataclass(frozen=True)
class Condition:
    stat: str  # mean, median, p99
    metric: str  # ttft, tpot, itl, e2el
    op: str
    limit_ms: float

    @property
    def key(self) -> str:
        """The level result's key: `p99_ttft_ms`."""
        return stat_key(self.stat, self.metric)

    def holds(self, value_ms: float) -> bool:
        return _OPS[self.op](value_ms, self.limit_ms)

    def describe(self) -> str:
        label = _METRICS[self.metric].label
        return f"{self.stat} {label} {self.op} {_ms(self.limit_ms)}"


@dataclass(frozen=True)
class Objective:
    text: str
    conditions: tuple[Condition, ...]
    at_op: str | None = None
    at_value: int | None = None

    def covers(self, concurrency: float) -> bool:
        """Whether a level at this concurrency is one the objective speaks of."""
        if self.at_op is None or self.at_value is None:
            return True
        return _OPS[self.at_op](concurrency, self.at_value)

    def describe_range(self) -> str:
        return f"C {self.at_op} {self.at_value}" if self.at_op else "any C"


def _ms(value: float) -> str:
    return f"{value / 1000:g}s" if value >= 1000 else f"{value:g}ms"


def parse_objective(text: str) -> Objective:
    """`p99 TTFT <= 2s at C >= 64` -> an Objective; an ObjectiveError says what is wrong."""
    body = " ".join(text.strip().lower().split())
    at_op = at_value = None
    if " at " in body:
        body, _, where = body.rpartition(" at ")
        found = _AT.match(where.strip())
        if found is None:
            raise ObjectiveError(f"cannot read the range {where!r}: expected `C >= 64` "
                                 "(C is the concurrency)")
        at_op, at_value = found["op"], int(found["value"])
    parts = [part.strip() for part in body.split(" and ")]
    conditions = []
    for part in parts:
        found = _CONDITION.match(part)
        if found is None:
            raise ObjectiveError(f"cannot read {part!r}: expected STAT METRIC OP LIMIT such as "
                                 "`p99 TTFT <= 2s` or `mean ITL < 50ms`")
        metric = _ALIASES.get(found["metric"], found["metric"])
        if metric not in _METRICS:
            raise ObjectiveError(f"unknown metric {found['metric']!r}: expected one of "
                                 f"{', '.join(_METRICS)} (or latency)")
        value = float(found["value"]) * (1000.0 if found["unit"] == "s" else 1.0)
        conditions.append(Condition(found["stat"], metric, found["op"], value))
    return Objective(text.strip(), tuple(conditions), at_op, at_value)
