"""The prediction a candidate is ranked and skipped by, before anything runs (pure).

`predict` takes a candidate's plan and returns a `Forecast`: whether it fits (the weights
and KV cache in the GPUs' memory), why not, and its predicted peak output tok/s. A candidate
predicted not to fit, or to lose by far (a predicted peak under half the best measured peak
of a trial meeting the SLO), is not applied: the table says why. Without a predictor every
candidate runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from orchestrator.plan.models import Plan

LOSES_BY_FAR = 0.5  # a predicted peak under this share of the best measured is not tried


class Forecast(Protocol):
    @property
    def fits(self) -> bool: ...

    @property
    def why(self) -> str: ...

    @property
    def peak_output_throughput(self) -> float: ...


Predict = Callable[[Plan], Forecast]


def skip_reason(forecast: Forecast | None, best: float | None) -> str | None:
    """Why a candidate is not worth a trial, or None to run it."""
    if forecast is None:
        return None
    if not forecast.fits:
        return f"skipped: {forecast.why}" if forecast.why else "skipped: predicted not to fit"
    peak = forecast.peak_output_throughput
    if best is not None and best > 0 and peak < LOSES_BY_FAR * best:
        return (f"skipped: predicted peak {peak:,.0f} tok/s < {LOSES_BY_FAR:g}x the best "
                f"measured {best:,.0f}")
    return None
