"""The limiter's advice as candidates (pure): what limits/advice.py says to try at the
baseline's plateau (`service.args.max-num-seqs: [256, 512]`, ...), each value a candidate
of its own, kept only when it lies inside the tune space (an axis of it, a value of its list
or inside its range); the candidate's other axes keep the baseline's values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.plan.models.matrix import canonical, dotted_key
from orchestrator.tune.space import Space, Values, key_of


def advised(suggestions: Sequence[dict[str, list[Any]]], space: Space,
            baseline: Values) -> list[Values]:
    """One candidate per suggestion's combination of values, in the advice's order, each the
    baseline with the suggestion's values; those outside the space are left out."""
    out: list[Values] = []
    seen = {key_of(baseline)}
    for matrix in suggestions:
        axes = {dotted_key(canonical(k)): v for k, v in matrix.items()}
        if not axes or not all(k in space.params for k in axes):
            continue
        width = max(len(v) for v in axes.values())
        for index in range(width):
            change = {k: v[min(index, len(v) - 1)] for k, v in axes.items()}
            if not all(space.holds(k, v) for k, v in change.items()):
                continue
            candidate = {**baseline, **change}
            if key_of(candidate) not in seen:
                seen.add(key_of(candidate))
                out.append(candidate)
    return out
