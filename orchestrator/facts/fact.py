"""What a host fact declares (`FACT = Fact(...)` in its module) and the small readers its
controller-side parser uses on the JSON answer.

A module of this package that defines `FACT` is a fact: the program shipped to the host calls
its host-side gatherer (`Fact.gather`, by name), and `parse_answer` its parser. Nothing else
lists the facts (program.py finds them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fact:
    """`gather`: the name of its host-side function `gather(request, answer)`, which adds the
    fact's keys to the answer when the request asks for it. `parse(answer)`: the
    controller-side reading of those keys (pure): what it found, by the name of the field of
    `Facts` (answer.py) each value fills; a name that is no field is kept in `Facts.extra`."""

    gather: str
    parse: Callable[[dict[str, Any]], dict[str, Any]]


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
