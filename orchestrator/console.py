"""The consoles orch prints to: a terminal's width on a terminal; anywhere else (a pipe, a
file, CI logs) as wide as the text needs, never wrapped or cropped, so `orch runs | grep`
and `> file` keep every identifier and figure whole. COLUMNS, when set, wins."""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console

UNBOUNDED = 1000  # "as wide as the text needs" for output that is not a terminal


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    console = Console(highlight=False, stderr=stderr, file=file)
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(highlight=False, stderr=stderr, file=file, width=UNBOUNDED, soft_wrap=True)
