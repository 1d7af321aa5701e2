"""Command-line number parsers the simulator's options share (argparse `type=`)."""

from __future__ import annotations

import argparse
import math


def positive(text: str, what: str, example: str) -> float:
    """A finite float above 0, or an argparse error naming `what` and an `example`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what} such as {example}, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected {what} greater than 0, got {text!r}")
    return value
