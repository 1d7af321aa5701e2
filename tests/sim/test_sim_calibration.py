"""Each profile reproduces the motivating deployment's figures within 5% (virtual time)."""

from __future__ import annotations

import statistics

import pytest

from orchestrator.sim.calibration import GUIDE_PROMPT, batch_run
from orchestrator.sim.profiles import MEAN_RESPONSE_TOKENS, PROFILES, RESPONSE_SPREAD
from orchestrator.sim.textgen import build_script, natural_length

CALIBRATED = [(name, c, target) for name, p in PROFILES.items() for c, target in p.targets.items()]


@pytest.mark.parametrize(("name", "concurrency", "target"), CALIBRATED)
def test_batch_throughput_matches_the_motivating_run(name: str, concurrency: int, target: float) -> None:
    result = batch_run(PROFILES[name], concurrency)
    assert result.throughput == pytest.approx(target, rel=0.05)


@pytest.mark.parametrize("name", [n for n, p in PROFILES.items() if p.targets])
def test_the_peak_is_a_plateau(name: str) -> None:
    profile = PROFILES[name]
    peak = batch_run(profile, profile.peak_concurrency).throughput
    beyond = batch_run(profile, profile.peak_concurrency * 2).throughput
    assert beyond == pytest.approx(peak, rel=0.05)  # more requests wait instead of running


def test_single_stream_latency_is_about_eight_seconds_for_kimi() -> None:
    profile = PROFILES["kimi-k2.5-nvfp4-8x-rtx-pro-6000"]
    latencies = [batch_run(profile, 1, first_key=k).wall_seconds for k in range(40)]
    assert statistics.mean(latencies) == pytest.approx(8.36, rel=0.05)


def test_response_lengths_average_510_with_a_bounded_spread() -> None:
    lengths = [natural_length(GUIDE_PROMPT, str(k)) for k in range(4000)]
    assert statistics.mean(lengths) == pytest.approx(MEAN_RESPONSE_TOKENS, rel=0.01)
    low = MEAN_RESPONSE_TOKENS * (1 - RESPONSE_SPREAD)
    high = MEAN_RESPONSE_TOKENS * (1 + RESPONSE_SPREAD)
    assert low - 1 <= min(lengths) < low + 5
    assert high - 5 < max(lengths) <= high + 1
    assert statistics.pstdev(lengths) > 30


def test_scripts_have_the_natural_length_when_thinking() -> None:
    for key in map(str, range(50)):
        assert build_script(GUIDE_PROMPT, key, True).natural_tokens == natural_length(GUIDE_PROMPT, key)


def test_the_time_scale_is_linear() -> None:
    # The model is computed in model seconds and the engine multiplies every step by the
    # scale; so normalised figures are scale-free. Here: doubling every cost doubles the wall.
    from dataclasses import replace

    profile = PROFILES["minimax-m2.5-4x-ep"]
    doubled = replace(
        profile,
        step_base_s=2 * profile.step_base_s,
        step_per_seq_s=2 * profile.step_per_seq_s,
        prefill_per_token_s=2 * profile.prefill_per_token_s,
    )
    assert batch_run(doubled, 64).wall_seconds == pytest.approx(2 * batch_run(profile, 64).wall_seconds)
