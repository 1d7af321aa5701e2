"""Percentiles and summaries: table tests plus properties against the standard library."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.bench.stats import percentile, relative_spread, summarize
from orchestrator.metrics import percentile_key

floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([5.0], 99, 5.0),
        ([1.0, 2.0], 50, 1.5),
        ([1.0, 2.0, 3.0, 4.0], 25, 1.75),
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),
        ([10.0, 20.0, 30.0], 0, 10.0),
        ([10.0, 20.0, 30.0], 100, 30.0),
        (list(map(float, range(1, 101))), 90, 90.1),
    ],
)
def test_percentile_table(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == pytest.approx(expected)


@pytest.mark.parametrize(("p", "key"), [(99, "p99"), (50.0, "p50"), (99.9, "p99.9")])
def test_percentile_key_matches_vllm_naming(p: float, key: str) -> None:
    assert percentile_key(p) == key


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)


@given(st.lists(floats, min_size=2, max_size=60))
def test_percentiles_equal_the_inclusive_quantiles_of_the_standard_library(values: list[float]) -> None:
    data = sorted(values)
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    for p in (1, 10, 50, 90, 99):
        assert percentile(data, p) == pytest.approx(cuts[p - 1], rel=1e-9, abs=1e-6)


@given(st.lists(floats, min_size=1, max_size=60), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values: list[float], a: float, b: float) -> None:
    data = sorted(values)
    low, high = min(a, b), max(a, b)
    assert data[0] <= percentile(data, low) <= percentile(data, high) <= data[-1]
    assert percentile(data, 0) == data[0]
    assert percentile(data, 100) == data[-1]


@given(st.lists(floats, min_size=1, max_size=60))
def test_summary_agrees_with_the_standard_library(values: list[float]) -> None:
    stats = summarize(values)
    assert stats["mean"] == pytest.approx(statistics.fmean(values), abs=1e-6)
    assert stats["median"] == pytest.approx(statistics.median(values), abs=1e-6)
    assert stats["std"] == pytest.approx(statistics.pstdev(values), abs=1e-4)
    assert stats["min"] == min(values)
    assert stats["max"] == max(values)
    assert stats["median"] == stats["p50"]


def test_summary_of_nothing_keeps_every_key_at_zero() -> None:
    stats = summarize([], (50, 99.9))
    assert stats == {"mean": 0.0, "median": 0.0, "std": 0.0, "min": 0.0, "max": 0.0, "p50": 0.0, "p99.9": 0.0}


@pytest.mark.parametrize(
    ("values", "spread"),
    [([], 0.0), ([100.0], 0.0), ([90.0, 110.0], 0.2), ([0.0, 0.0], 0.0), ([100.0, 100.0, 100.0], 0.0)],
)
def test_relative_spread(values: list[float], spread: float) -> None:
    assert relative_spread(values) == pytest.approx(spread)
