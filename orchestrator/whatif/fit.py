"""Fitting the constants to measured deployments, as a plain least squares.

A batch level's wall time is the sum of its steps' times, and which steps run with which batch
does not depend on the constants (batch.py), so the wall time is linear in them:
wall(C) = fixed(C) + sum_j constant_j x feature_j(C). The fit minimises the squared relative
error of the wall times of every measured level (C=1 and the peak, and any other target),
with a tiny ridge so that a constant the rows cannot tell apart from another stays at a small
value instead of running off, and no constant below zero (one that would is held at 0).
Pure Python: six unknowns need no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.whatif.anchors import Measured
from orchestrator.whatif.batch import run
from orchestrator.whatif.costs import Constants
from orchestrator.whatif.engine_cost import engine

QUANTS = ("nvfp4", "int4", "fp8")
NAMES = ("layer_s", "seq_s", "hop_s", *(f"w_{q}" for q in QUANTS))
RIDGE = 1e-6


def constants(values: Sequence[float], known: Sequence[str] = QUANTS) -> Constants:
    """The constants of `values` (NAMES' order); a quantization not in `known` (no row
    calibrated it) is left out, so it takes the mean of the others (Constants.weight_factor)."""
    weight = {q: v for q, v in zip(QUANTS, values[3:], strict=True) if q in known}
    return Constants(layer_s=values[0], seq_s=values[1], hop_s=values[2], weight=weight)


def wall(measured: Measured, consts: Constants, concurrency: int) -> tuple[float, int]:
    """(model seconds, tokens) of a batch level on the formulas alone (no anchor)."""
    level = run(engine(measured.box, consts, anchored=False).cost, concurrency)
    return level.wall_s, level.tokens


@dataclass(frozen=True)
class Row:
    name: str
    concurrency: int
    target: float  # tok/s
    tokens: int
    fixed: float  # wall seconds with every constant 0
    features: tuple[float, ...]


def rows(deployments: dict[str, Measured]) -> list[Row]:
    out = []
    zero = [0.0] * len(NAMES)
    for name, measured in deployments.items():
        for c, target in measured.targets.items():
            fixed, tokens = wall(measured, constants(zero), c)
            features = []
            for j in range(len(NAMES)):
                unit = [0.0] * len(NAMES)
                unit[j] = 1.0
                features.append(wall(measured, constants(unit), c)[0] - fixed)
            out.append(Row(name, c, target, tokens, fixed, tuple(features)))
    return out


def calibrate(deployments: dict[str, Measured]) -> Constants:
    """The constants fitted to `deployments`' targets."""
    values = least_squares(rows(deployments))
    known = {m.box.model.quant for m in deployments.values()}
    return constants(values, [q for q in QUANTS if q in known])


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting."""
    n = len(vector)
    a = [[*row, vector[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col and a[col][col]:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] if a[i][i] else 0.0 for i in range(n)]


def least_squares(fit_rows: Sequence[Row]) -> list[float]:
    """The non-negative constants minimising sum ((wall - target wall) / target wall)^2."""
    n = len(NAMES)
    free = [j for j in range(n) if any(r.features[j] for r in fit_rows)]
    while True:
        scale = [max(abs(r.features[j]) / (r.tokens / r.target) for r in fit_rows) for j in free]
        design = [[r.features[j] / (r.tokens / r.target) / s for j, s in zip(free, scale, strict=True)]
                  for r in fit_rows]
        goal = [1.0 - r.fixed / (r.tokens / r.target) for r in fit_rows]
        normal = [[sum(row[i] * row[k] for row in design) + (RIDGE if i == k else 0.0)
                   for k in range(len(free))] for i in range(len(free))]
        rhs = [sum(row[i] * g for row, g in zip(design, goal, strict=True)) for i in range(len(free))]
        solved = [v / s for v, s in zip(_solve(normal, rhs), scale, strict=True)]
        negative = [j for j, v in zip(free, solved, strict=True) if v < 0]
        if not negative:
            values = [0.0] * n
            for j, v in zip(free, solved, strict=True):
                values[j] = v
            return values
        free = [j for j in free if j not in negative]


def predicted(measured: Measured, consts: Constants) -> dict[int, float]:
    """Throughput of each target level on the formulas alone."""
    out = {}
    for c in measured.targets:
        seconds, tokens = wall(measured, consts, c)
        out[c] = tokens / seconds
    return out
