"""Command-line value parsers the simulator's options share (argparse `type=`)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any


def positive(text: str, what: str, example: str) -> float:
    """A finite float above 0, or an argparse error naming `what` and an `example`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what} such as {example}, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected {what} greater than 0, got {text!r}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object, or an argparse error quoting the text (and the JSON error)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value
