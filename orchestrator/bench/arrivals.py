"""Open-loop arrival schedules: when each request of a rate level is due (pure).

Gaps follow a gamma distribution with shape `burstiness` and mean 1/rate, as in
`vllm bench serve`: burstiness 1 is a Poisson process, below 1 is burstier, above 1 is
more regular. `constant` spaces requests exactly 1/rate apart.
"""

from __future__ import annotations

import random
from typing import Literal


def arrival_offsets(
    count: int,
    rate: float,
    *,
    kind: Literal["poisson", "constant"] = "poisson",
    burstiness: float = 1.0,
    seed: int = 0,
) -> list[float]:
    """Offsets in seconds from the level's start; the first request starts at 0."""
    if count < 0:
        raise ValueError("count must not be negative")
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    if burstiness <= 0:
        raise ValueError(f"burstiness must be positive, got {burstiness}")
    if count == 0:
        return []
    if kind == "constant":
        return [i / rate for i in range(count)]
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    offsets = [0.0]
    for _ in range(count - 1):
        offsets.append(offsets[-1] + rng.gammavariate(burstiness, scale))
    return offsets


def requests_for_rate(requests_per_level: int | str, rate: float) -> int:
    """A count stays a count; a multiple `Nx` means N seconds' worth of requests at `rate`."""
    if isinstance(requests_per_level, int):
        return requests_per_level
    factor = float(requests_per_level.rstrip("x"))
    return max(1, round(factor * rate))
