"""Summary statistics of latency samples: the one home of percentile arithmetic.

Percentiles use linear interpolation between closest ranks (numpy's default `linear`
method, which `vllm bench serve` uses), so our p99 and theirs agree on the same samples.
Standard deviation is the population form (ddof=0), again as numpy's default.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from orchestrator.metrics import DEFAULT_PERCENTILES, percentile_key


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The p-th percentile (0 <= p <= 100) of already sorted, non-empty values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {p}")
    rank = (len(sorted_values) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = rank - low
    lo_value = sorted_values[low]
    hi_value = sorted_values[high]
    if fraction == 0.0 or lo_value == hi_value:
        return float(lo_value)
    return float(lo_value + (hi_value - lo_value) * fraction)


def summarize(
    values: Iterable[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, float]:
    """mean, median, std, min, max and each percentile as `pNN`; zeros for no samples
    (vllm bench serve reports 0 rather than null, and the result keys stay present)."""
    data = sorted(values)
    keys = ["mean", "median", "std", "min", "max", *(percentile_key(p) for p in percentiles)]
    if not data:
        return dict.fromkeys(keys, 0.0)
    n = len(data)
    mean = math.fsum(data) / n
    variance = math.fsum((x - mean) ** 2 for x in data) / n
    out = {
        "mean": mean,
        "median": percentile(data, 50.0),
        "std": math.sqrt(variance),
        "min": float(data[0]),
        "max": float(data[-1]),
    }
    for p in percentiles:
        out[percentile_key(p)] = percentile(data, p)
    return out


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / mean of repeated measurements; 0 for fewer than two or a zero mean."""
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    if mean == 0:
        return 0.0
    return (max(values) - min(values)) / mean
