"""The one JSON reader of the files `orch compare`, `orch report` and `orch runs` read: a run
folder's records and benchmark results, orch's own or `vllm bench serve`'s.

Such a file may have been edited by hand or made by anyone, so besides JSON's own syntax:

- nesting deeper than `MAX_DEPTH` (64) levels is refused at the line and column where it
  goes deeper (orch's records are a few levels deep; Python's parser would raise a
  RecursionError at about a thousand);
- an integer of more than 20 digits is refused (Python's own parser raises a ValueError past
  4,300);
- in result files (`figures=True`), a number that is not a measurement is refused at its
  line and column: NaN and Infinity (which JSON does not have, and orch's writer never
  writes: it writes null), a number that overflows to infinity (`1e999`), and a fraction
  beyond `MAX_FIGURE` (1e15: a petabyte, 31,000 years in ms), which would turn a plot's axis
  or a sum into infinity.

Every refusal is a `RunFolderError` at `file:line:column` that says what was expected.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from orchestrator.errors import RunFolderError

MAX_DEPTH = 64
MAX_FIGURE = 1e15
REPAIR = "orch writes its records whole; this one was edited or cut: restore it, or move the " \
          "folder away"
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # strings skipped whole, brackets counted


class Refused(ValueError):
    """What `loads` will not take, and where in the text (an offset)."""

    def __init__(self, pos: int, what: str) -> None:
        super().__init__(what)
        self.pos, self.what = pos, what


def loads(text: str, *, figures: bool = False) -> Any:
    """`json.loads`, refusing deep nesting and (with `figures`) numbers that are not
    measurements: raises `json.JSONDecodeError` or `Refused`."""
    bad: list[str] = []
    # An integer of thousands of digits is a ValueError of Python's own, not a JSON error: one
    # of more than 20 digits is refused in any record (a plan's `seed` may be large).
    hooks: dict[str, Any] = {"parse_int": lambda s: _figure(s, int(s) if len(s) <= 20 else math.inf, bad, math.inf)}
    if figures:
        hooks |= {"parse_float": lambda s: _figure(s, float(s), bad),
                  "parse_constant": lambda s: _figure(s, math.nan, bad)}
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        raise Refused(_too_deep_at(text), _DEEP) from None
    if _depth(value) > MAX_DEPTH:
        raise Refused(_too_deep_at(text), _DEEP)
    if bad:
        expected = f"a finite number within ±{MAX_FIGURE:g}" if _is_float(bad[0]) else "an integer of at most 20 digits"
        raise Refused(_where(text, bad[0]), f"{_shown(bad[0])} is not a figure orch can use: expected {expected}")
    return value


_DEEP = f"nested deeper than {MAX_DEPTH} levels: expected a record of a few levels"


def _is_float(literal: str) -> bool:
    return not literal.lstrip("-").isdigit()


def _figure(literal: str, value: float | int, bad: list[str], limit: float = MAX_FIGURE) -> float | int | None:
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > limit:
        bad.append(literal)
        return None
    return value


def _depth(value: Any) -> int:
    """How deep lists and objects nest in a parsed value (no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level <= MAX_DEPTH:
            stack.extend((child, level + 1) for child in children)
    return deepest


def not_a_figure(value: float | int | None) -> str | None:
    """What is wrong with a number read some other way (pydantic's JSON), None if nothing."""
    if value is None or (math.isfinite(value) and abs(value) <= MAX_FIGURE):
        return None
    return f"{value:g} is not a figure orch can use: expected a finite number within ±{MAX_FIGURE:g}"


def _too_deep_at(text: str) -> int:
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return match.start()
        elif token in "]}":
            depth -= 1
    return 0


def _where(text: str, literal: str) -> int:
    found = re.search(r"(?<![\w.\"-])" + re.escape(literal) + r"(?![\w.])", text)
    return found.start() if found else 0


def _shown(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:12]}...{literal[-6:]} ({len(literal)} digits)"


def position(text: str, pos: int) -> tuple[int, int]:
    """(line, column) of an offset, both from 1."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def parse_json(path: Path, text: str, *, figures: bool = False) -> Any:
    """A record's JSON; a RunFolderError at `path:line:column` otherwise. An empty or cut
    file says so: a write that never finished (a crash before the rename, an older orch)."""
    if not text.strip():
        raise RunFolderError(f"{path}: the file is empty (a write that never finished?)",
                             hint=REPAIR)
    try:
        return loads(text, figures=figures)
    except json.JSONDecodeError as error:
        cut = error.pos >= len(text.rstrip())  # it ends where the JSON should go on
        raise RunFolderError(
            f"{path}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}"
            + (" (the file ends there: cut short?)" if cut else ""), hint=REPAIR) from None
    except Refused as refused:
        line, column = position(text, refused.pos)
        raise RunFolderError(f"{path}:{line}:{column}: {refused.what}", hint=REPAIR) from None
