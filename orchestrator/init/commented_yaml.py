"""Block-style YAML with comments, written from data: each scalar goes through the YAML
serializer (a hostile value is quoted, never formatted into the text), comments are constant
text placed by dotted path (`Notes`), and `to_yaml` checks that the text parses back to exactly
the data it was made from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass
class Notes:
    """Comments by dotted path (`service.args`, `smoke.0`): lines above a key, at the end of
    its line, and below it (indented as its children)."""

    above: dict[str, list[str]] = field(default_factory=dict)
    inline: dict[str, str] = field(default_factory=dict)
    below: dict[str, list[str]] = field(default_factory=dict)


_WIDE = 1 << 30  # never fold a scalar over several lines


# Strings written bare: a word or path with at least one letter (so `0.17.1` and `10.0.0.5`
# are quoted and stay strings when edited). Anything else, hostile values included, is quoted.
_BARE = re.compile(r"[A-Za-z0-9._/@+=~-]*[A-Za-z/][A-Za-z0-9._/@+=~-]*")


def scalar(value: Any) -> str:
    """One value as YAML on one line, by the serializer (flow style for lists and maps)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=_WIDE, allow_unicode=True)
    text = text.removesuffix("\n").removesuffix("\n...")
    if isinstance(value, str) and not (_BARE.fullmatch(value) and text == value):
        text = yaml.safe_dump(value, default_style='"', width=_WIDE, allow_unicode=True)
        text = text.removesuffix("\n")
    if not text.isprintable():  # a line break, even a Unicode one: escape it, double-quoted
        text = yaml.safe_dump(value, default_style='"', default_flow_style=True, width=_WIDE)
        text = text.removesuffix("\n")
    return text


def to_yaml(data: Mapping[str, Any], notes: Notes) -> str:
    """Block-style YAML of `data` with `notes` as comments. Raises RuntimeError (a bug) if the
    text does not parse back to `data`."""
    lines: list[str] = []
    _mapping(data, (), 0, "", notes, lines)
    text = "\n".join(lines) + "\n"
    if yaml.safe_load(text) != data:
        raise RuntimeError("orch init: the YAML written does not read back as the plan meant")
    return text


def _is_block(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value)
    return bool(value) and isinstance(value, list) and all(
        isinstance(item, dict) and item for item in value)


def _comment(pad: str, line: str) -> str:
    return f"{pad}# {line}" if line else ("" if not pad else f"{pad}#")


def _mapping(data: Mapping[str, Any], path: tuple[str, ...], indent: int, lead: str,
             notes: Notes, lines: list[str]) -> None:
    """`lead` replaces the indentation of the first key (`- ` of a list item)."""
    pad = " " * indent
    for index, (key, value) in enumerate(data.items()):
        here = (*path, str(key))
        dotted = ".".join(here)
        lines += [_comment(pad, line) for line in notes.above.get(dotted, [])]
        head = f"{lead if index == 0 and lead else pad}{scalar(key)}:"
        eol = f"  # {notes.inline[dotted]}" if dotted in notes.inline else ""
        if isinstance(value, dict) and value:
            lines.append(head + eol)
            _mapping(value, here, indent + 2, "", notes, lines)
        elif _is_block(value):
            lines.append(head + eol)
            for number, item in enumerate(value):
                _mapping(item, (*here, str(number)), indent + 4, f"{pad}  - ", notes, lines)
        elif value is None:
            lines.append(head + eol)
        else:
            lines.append(f"{head} {scalar(value)}{eol}")
        lines += [_comment(pad + "  ", line) for line in notes.below.get(dotted, [])]
