"""The consoles orch prints to: a terminal's width on a terminal; anywhere else (a pipe, a
file, CI logs) as wide as the text needs, never wrapped or cropped, so `orch runs | grep`
and `> file` keep every identifier and figure whole. COLUMNS, when set, wins.

Text orch did not write (a host's output, a server's answer, a run folder edited by hand) can
hold terminal controls: ESC sequences set the title, clear the screen, or forge output.
`shown()` is the one place that makes them visible (`\x1b`), for every print; the consoles
made here apply it to every piece of text they render as well, so a value that reaches a
table or a live view unescaped still cannot drive the terminal.

They mask secrets the same way (masking.py): each string before it is laid out (a table
cell, a printed line, so a secret is found before a cell cuts or wraps it), and each piece
of text they render. Text is still masked where it is recorded; this is the net under it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from orchestrator.masking import mask

UNBOUNDED = 1000  # "as wide as the text needs" for output that is not a terminal

# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), and the
# bidirectional overrides that make text read differently from what it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str, *, markup: bool = False) -> str:
    """`text` from outside orch, safe to print: terminal controls made visible; with
    `markup`, rich markup escaped too, for text that goes into a markup string."""
    safe = _CONTROL.sub(_visible, text)
    return escape(safe) if markup else safe


class _SafeConsole(Console):
    """A console that masks secrets and shows controls hidden in the text it renders; its
    own cursor and style codes (control segments, styles) pass as they are."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(mask(text), **options)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(shown(mask(segment.text)), segment.style)
            for segment in buffer)


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    # emoji=False: a host's text such as ":100:" is shown as it is (and rich's emoji table
    # is not loaded: 8 ms of start-up).
    console = _SafeConsole(highlight=False, emoji=False, stderr=stderr, file=file)
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return _SafeConsole(highlight=False, emoji=False, stderr=stderr, file=file, width=UNBOUNDED,
                        soft_wrap=True)
