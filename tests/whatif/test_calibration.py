"""The constants fitted on the three measured deployments predict each within 10% at C=1 and
at its peak (the formulas alone, no anchor), the shipped constants are that fit, and the
leave-one-out fits run (their figures are docs/simulator.md's table, whatever they are)."""

from __future__ import annotations

import math

import pytest

from orchestrator.whatif import fit
from orchestrator.whatif.anchors import MEASURED
from orchestrator.whatif.engine_cost import CONSTANTS

POINTS = [(name, c) for name, m in MEASURED.items() for c in m.targets]


@pytest.fixture(scope="module")
def fitted() -> fit.Constants:
    return fit.calibrate(MEASURED)


@pytest.mark.parametrize(("name", "concurrency"), POINTS)
def test_calibrated_on_all_three_each_is_within_ten_percent(fitted: fit.Constants, name: str,
                                                            concurrency: int) -> None:
    measured = MEASURED[name]
    got = fit.predicted(measured, fitted)[concurrency]
    assert got == pytest.approx(measured.targets[concurrency], rel=0.10)


def test_the_shipped_constants_are_the_fit(fitted: fit.Constants) -> None:
    assert CONSTANTS.layer_s == pytest.approx(fitted.layer_s, rel=1e-3)
    assert CONSTANTS.seq_s == pytest.approx(fitted.seq_s, rel=1e-3)
    assert CONSTANTS.hop_s == pytest.approx(fitted.hop_s, rel=1e-3)
    for quant, value in fitted.weight.items():
        assert CONSTANTS.weight[quant] == pytest.approx(value, rel=1e-3)
    assert min(fitted.layer_s, fitted.seq_s, fitted.hop_s) >= 0


@pytest.mark.parametrize("held_out", list(MEASURED))
def test_leave_one_out_predicts_the_third_from_the_other_two(held_out: str) -> None:
    others = fit.calibrate({k: v for k, v in MEASURED.items() if k != held_out})
    quant = MEASURED[held_out].box.model.quant
    assert quant not in others.weight  # its kernels were never measured: the others' mean
    got = fit.predicted(MEASURED[held_out], others)
    assert all(math.isfinite(v) and v > 0 for v in got.values())
    assert set(got) == set(MEASURED[held_out].targets)
