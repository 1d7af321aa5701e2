"""A limiter's verdict (pure data): its name, how sure, why in words, the deciding figures.
rules.py and fleet_rules.py make them; verdicts.py keeps them in the level files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Confidence = Literal["high", "medium", "low"]


@dataclass(frozen=True)
class Verdict:
    name: str  # one of rules.LIMITERS
    confidence: Confidence
    why: str
    figures: dict[str, float | str | bool] = field(default_factory=dict)
