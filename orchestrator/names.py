"""The one rule for a name that becomes a file or folder name: a plan (`runs/<plan>/`), an
inventory host (`hosts/<host>/`, a lock file), a service (a systemd unit, a state folder), a
command (`commands/<name>.log`). Every loader holds its names to it, so a name can neither
climb out of its folder (`..`, `/`) nor carry a shell or terminal payload.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")

NAME_CHARS = "letters, digits and . _ @ : -"
MAX_NAME = 200  # under NAME_MAX (255) with room for a prefix and suffix (apply-<host>.lock)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]*")


def is_name(value: object, *, max_length: int = MAX_NAME) -> bool:
    return isinstance(value, str) and len(value) <= max_length and bool(_NAME.fullmatch(value))


def check_name(value: str, what: str, *, max_length: int = MAX_NAME) -> str:
    """`value` when it is a safe name; a ValueError saying what `what` must be otherwise."""
    if not is_name(value, max_length=max_length):
        raise ValueError(f"expected {what}: {NAME_CHARS}, starting with a letter or digit, "
                         f"at most {max_length} characters; got {value!r}")
    return value


def flag_name(key: str) -> str:
    """A `service.args` key as its server flag's long name: a plan may write either spelling
    (`tensor_parallel_size` is `--tensor-parallel-size`); every reader folds it here."""
    return key.replace("_", "-")


def arg_value(args: Mapping[str, V], flag: str) -> V | None:
    """The value `args` (a plan's `service.args`) gives the flag `flag`, however its key is
    spelled; None when it gives none."""
    return next((value for key, value in args.items() if flag_name(key) == flag), None)
