"""The knee search on known throughput curves (pure: no server involved)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrator.bench.auto import Observation, decide, knee_of_curve
from orchestrator.plan.models import AutoSweep


def saturating(t0: float, k: float, cap: int | None = None) -> Callable[[int], float]:
    """The continuous-batching curve T(b) = b / (t0 + k b), flat beyond `cap` sequences."""

    def curve(c: int) -> float:
        b = min(c, cap) if cap else c
        return b / (t0 + k * b)

    return curve


def search(
    curve: Callable[[int], float], auto: AutoSweep, slo_limit: int | None = None
) -> tuple[int | None, str, list[int]]:
    observed: dict[int, Observation] = {}
    order: list[int] = []
    for _ in range(100):
        decision = decide(observed, auto)
        if decision.next_level is None:
            return decision.knee, decision.reason, order
        c = decision.next_level
        assert c not in observed, "a level is never measured twice"
        assert 1 <= c <= auto.max_concurrency
        order.append(c)
        observed[c] = Observation(curve(c), slo_ok=slo_limit is None or c <= slo_limit)
    raise AssertionError("the search did not end")


def true_knee(curve: Callable[[int], float], threshold: float, upto: int) -> int | None:
    return knee_of_curve({c: curve(c) for c in range(1, 2 * upto + 1)}, threshold)


def test_kimi_like_curve_knee_is_found_within_the_resolution() -> None:
    # a profile like the simulator's Kimi NVFP4: flat beyond 128 running sequences
    curve = saturating(0.015643, 0.0006443, cap=128)
    auto = AutoSweep()
    knee, reason, order = search(curve, auto)
    expected = true_knee(curve, auto.threshold, 1024)
    assert expected is not None and knee is not None
    assert reason == "plateau"
    assert abs(knee - expected) <= max(1, int(knee * auto.resolution))
    assert order[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # doubling first
    assert len(order) <= 12


@settings(max_examples=60, deadline=None)
@given(
    t0=st.floats(0.001, 0.1),
    k=st.floats(0.00001, 0.01),
    cap=st.one_of(st.none(), st.integers(2, 600)),
    threshold=st.floats(0.02, 0.3),
    resolution=st.sampled_from([0.1, 0.25, 0.5]),
)
# the cap (89) between two doubling levels (64, 128): the chord between them underestimates
# T(80) and put the knee at 40 (true: 46)
@example(t0=0.0449, k=0.00367, cap=89, threshold=0.117, resolution=0.1)
def test_knee_is_bracketed_on_any_saturating_curve(
    t0: float, k: float, cap: int | None, threshold: float, resolution: float
) -> None:
    curve = saturating(t0, k, cap)
    auto = AutoSweep(threshold=threshold, resolution=resolution, max_concurrency=2048)
    knee, reason, _ = search(curve, auto)
    expected = true_knee(curve, threshold, 1024)  # knees whose doubling fits under the cap
    if expected is None:
        assert reason in ("max_concurrency", "plateau")
        return
    assert knee is not None
    # the search stops when the bracket is within `resolution` of its upper end (at or above
    # the true knee): one such step
    assert abs(knee - expected) <= max(1, int(max(knee, expected) * resolution))


def test_a_bend_between_two_doubling_levels_is_measured_not_interpolated() -> None:
    curve = saturating(0.0449, 0.00367, cap=89)
    auto = AutoSweep(threshold=0.117, resolution=0.1)
    knee, reason, order = search(curve, auto)
    assert true_knee(curve, auto.threshold, 1024) == 46
    assert (knee, reason) == (48, "plateau")
    # 48: the flat top bounds T(96) already; 40 and 44: the estimates of T(80) and T(88)
    # disagree, so both are measured
    assert order == [1, 2, 4, 8, 16, 32, 64, 128, 48, 40, 80, 44, 88]


def test_a_broken_slo_bounds_the_knee() -> None:
    curve = saturating(0.015, 0.0006)
    knee, reason, order = search(curve, AutoSweep(), slo_limit=40)
    assert reason == "slo"
    assert knee is not None and 30 <= knee <= 40
    assert max(order) <= 64


def test_the_search_stops_at_max_concurrency_when_throughput_keeps_rising() -> None:
    knee, reason, order = search(lambda c: float(c), AutoSweep(max_concurrency=50))
    assert (knee, reason) == (50, "max_concurrency")
    assert order == [1, 2, 4, 8, 16, 32, 50]


def test_a_failed_level_ends_the_search_at_the_previous_one() -> None:
    observed = {1: Observation(10.0), 2: Observation(19.0), 4: Observation(0.0, usable=False)}
    decision = decide(observed, AutoSweep())
    assert (decision.next_level, decision.knee, decision.reason) == (None, 2, "failed")


@pytest.mark.parametrize(
    ("curve", "expected"),
    [
        ({1: 10.0, 2: 20.0, 4: 20.5, 8: 21.5}, 2),
        ({1: 10.0, 2: 10.1}, 1),
        ({1: 10.0, 2: 20.0}, None),
    ],
)
def test_knee_of_a_known_curve(curve: dict[int, float], expected: int | None) -> None:
    assert knee_of_curve(curve, 0.05) == expected


def test_a_failed_doubling_level_is_not_measured_again_and_the_search_ends() -> None:
    curve = saturating(0.0449, 0.00367, cap=89)
    auto = AutoSweep(threshold=0.117, resolution=0.1)
    observed: dict[int, Observation] = {}
    order: list[int] = []
    for _ in range(30):
        decision = decide(observed, auto)
        if decision.next_level is None:
            break
        c = decision.next_level
        assert c not in observed
        order.append(c)
        observed[c] = Observation(0.0, usable=False) if c == 80 else Observation(curve(c))
    assert decision.next_level is None and decision.reason == "plateau"
    assert 80 in order and decision.knee is not None and 36 <= decision.knee <= 48
