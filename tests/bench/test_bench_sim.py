"""The engine against the simulator (`orch sim serve`, a real subprocess): token counts,
usage against counted chunks, the reasoning split, open-loop arrivals, the knee of the
Kimi NVFP4 profile, and a crash mid-sweep."""

from __future__ import annotations

import itertools
import json
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from orchestrator.bench.anomalies import capped
from orchestrator.bench.auto import knee_of_curve
from orchestrator.bench.sweep import SweepResult, run_sweep
from orchestrator.bench.workload import DEFAULT_PROMPT
from orchestrator.plan.models import Bench
from orchestrator.runs.run_records import LevelResult
from orchestrator.sim.profiles import get_profile
from orchestrator.sim.scheduler import Scheduler, Sequence
from orchestrator.sim.testing import running_simulator
from orchestrator.sim.textgen import chat_prompt_tokens

pytestmark = pytest.mark.slow

KIMI = "kimi-k2.5-nvfp4-8x-rtx-pro-6000"
FAST_START = {"startup_time_scale": 0.001}


def sweep(url: str, out: Path, **config: Any) -> SweepResult:
    return run_sweep(Bench.model_validate(config), base_url=url, model=None, api_key=None, out_dir=out)


def rows(out: Path, label: str) -> list[dict[str, Any]]:
    lines = (out / f"requests-{label}.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if not r["warmup"]]


def level(out: Path, label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"level-{label}.json").read_text())
    return data


@pytest.mark.parametrize("version", ["0.17.1", "0.13.0", "0.11.0"])
def test_tokens_usage_and_the_reasoning_split(tmp_path: Path, version: str) -> None:
    # 0.17 sends delta.reasoning, 0.13 both names (with nulls), 0.11 only reasoning_content
    with running_simulator(profile="instant", reasoning_parser="kimi_k2", vllm_version=version, **FAST_START) as sim:
        result = sweep(sim.base_url, tmp_path, concurrency=[2], requests_per_level=4, max_tokens=1024)
    c2 = level(tmp_path, "c2")
    assert c2["completed"] == 4 and c2["failed"] == 0
    assert c2["simulated"] is True and c2["simulator_profile"] == "instant"
    assert result.server.model == "moonshotai/Kimi-K2.5"
    assert c2["token_source"] == "usage"
    for row in rows(tmp_path, "c2"):
        # usage counts the end-of-thinking token, which streams as no chunk of its own
        assert row["counted_chunks"] > 0
        assert row["output_tokens"] - row["counted_chunks"] in (0, 1)
        assert row["reasoning_tokens"] > 0 and row["content_tokens"] > 0
        assert row["reasoning_tokens"] + row["content_tokens"] == row["output_tokens"]
        # reasoning comes first (in the same read under load: the same clock reading)
        assert row["ttft_content_ms"] >= row["ttft_ms"]
    assert c2["total_reasoning_tokens"] + c2["total_content_tokens"] == c2["total_output_tokens"]


def test_thinking_off_means_no_reasoning_tokens(tmp_path: Path) -> None:
    with running_simulator(profile="instant", reasoning_parser="kimi_k2", **FAST_START) as sim:
        sweep(sim.base_url, tmp_path, concurrency=[1], requests_per_level=2, thinking=False, max_tokens=200)
    c1 = level(tmp_path, "c1")
    assert c1["total_reasoning_tokens"] == 0 and c1["total_content_tokens"] > 0
    assert c1["mean_ttft_ms"] == pytest.approx(c1["mean_ttft_content_ms"])


def test_rate_mode_arrivals_follow_the_poisson_schedule(tmp_path: Path) -> None:
    with running_simulator(profile="instant", **FAST_START) as sim:
        sweep(sim.base_url, tmp_path, rate=[25.0], requests_per_level=60, max_tokens=8, warmup=0, seed=3)
    r25 = level(tmp_path, "r25")
    assert (r25["request_rate"], r25["burstiness"], r25["max_concurrency"]) == (25.0, 1.0, None)
    assert r25["completed"] == 60
    starts = sorted(r["start_s"] for r in rows(tmp_path, "r25"))
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 25, rel=0.35)
    assert 0.6 < statistics.pstdev(gaps) / mean < 1.5  # exponential gaps: CV near 1, not 0
    assert r25["client_schedule_lag_ms"]["median"] < 10


def _closed_loop_throughput(concurrency: int, max_tokens: int) -> float:
    """The profile's prediction for a closed loop of C workers and 2C requests, in model
    time, from the simulator's own scheduler replayed without a clock."""
    profile = get_profile(KIMI)
    scheduler = Scheduler(profile=profile, max_num_seqs=profile.max_num_seqs, kv_capacity=profile.kv_cache_tokens)
    prompt = chat_prompt_tokens([DEFAULT_PROMPT])
    total, started, sequences = 2 * concurrency, 0, []

    def start() -> None:
        nonlocal started
        seq = Sequence(prompt_tokens=prompt, max_tokens=max_tokens, natural_tokens=None)
        scheduler.add(seq)
        sequences.append(seq)
        started += 1

    for _ in range(concurrency):
        start()
    now = 0.0
    while scheduler.has_work():
        now += scheduler.plan_step(now).seconds
        for _ in range(scheduler.complete_step(now)):
            if started < total:
                start()
    return sum(s.generated for s in sequences) / now


def test_auto_sweep_finds_the_knee_of_the_kimi_nvfp4_profile(tmp_path: Path) -> None:
    threshold, resolution, max_tokens = 0.10, 0.4, 32
    curve = lru_cache(maxsize=None)(lambda c: _closed_loop_throughput(c, max_tokens))
    expected = knee_of_curve({c: curve(c) for c in range(1, 257)}, threshold)
    assert expected is not None
    with running_simulator(profile=KIMI, time_scale=0.2, reasoning_parser="kimi_k2", **FAST_START) as sim:
        result = sweep(
            sim.base_url, tmp_path, concurrency="auto", requests_per_level="2x", max_tokens=max_tokens,
            ignore_eos=True, warmup=0, auto={"threshold": threshold, "resolution": resolution},
        )
    assert result.knee_reason == "plateau" and result.knee is not None
    # within one step of the search's final bracket
    assert abs(result.knee - expected) <= max(1, int(result.knee * resolution)), (result.knee, expected)
    levels = [lv.spec.concurrency for lv in result.levels]
    assert levels[:7] == [1, 2, 4, 8, 16, 32, 64]
    c1 = level(tmp_path, "c1")
    assert c1["time_scale"] == 0.2 and c1["normalized"]["time_scale"] == 0.2
    # in model time the single stream runs at the profile's 61 tok/s
    assert c1["normalized"]["output_throughput"] == pytest.approx(curve(1), rel=0.1)
    assert c1["output_throughput"] == pytest.approx(c1["normalized"]["output_throughput"] / 0.2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["knee"] == result.knee and summary["simulated"] is True
    # the server's own view of the busiest level: its running batch and token counter (the
    # search doubles to 256 unless a loaded machine makes 128 look like the plateau already)
    busiest = max(levels)
    assert busiest >= 128, levels
    top = level(tmp_path, f"c{busiest}")
    server = top["server_metrics"]
    assert server["scrapes"] >= 2
    if busiest > 128:  # max_num_seqs of the profile: the rest wait
        assert server["max_running"] == 128 and server["max_waiting"] > 0
    else:  # a scrape may fall in a request's turn-round
        assert 120 <= server["max_running"] <= 128
    assert server["delta_generation_tokens"] == top["total_output_tokens"]
    # the same tokens (above, exactly); the rates differ by where the first and last scrapes
    # fall around the level, which a loaded machine moves by a scrape interval (seen: 3,124
    # against 4,067 tok/s in the full suite)
    assert server["server_output_throughput"] == pytest.approx(top["output_throughput"], rel=0.3)


def test_an_engine_crash_mid_sweep_keeps_the_finished_levels(tmp_path: Path) -> None:
    # c1: 1 warm-up + 2 requests; the engine dies during the first request after 5 finished
    with running_simulator(profile="instant", crash_after_requests=5, **FAST_START) as sim:
        result = sweep(sim.base_url, tmp_path, concurrency=[1, 2, 4, 8], requests_per_level=2, max_tokens=16)
    assert result.stopped in ("server_unhealthy", "server_gone")
    labels = [lv.spec.label for lv in result.levels]
    assert labels[:2] == ["c1", "c2"] and "c8" not in labels
    assert level(tmp_path, "c1")["partial"] is False and level(tmp_path, "c1")["failed"] == 0
    last = level(tmp_path, labels[-1])
    assert last["partial"] is True and last["stopped"] == result.stopped
    failed = sum(level(tmp_path, label)["failed"] for label in labels)
    assert failed >= 1
    csv_lines = (tmp_path / "sweep.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + len(labels)


def test_an_api_key_is_sent_and_never_written(tmp_path: Path) -> None:
    from orchestrator import masking
    from orchestrator.errors import BenchError

    key = "sk-bench-secret-4242"
    masking.register(key)
    with running_simulator(profile="instant", api_key=key, **FAST_START) as sim:
        with pytest.raises(BenchError, match="requires an API key"):
            sweep(sim.base_url, tmp_path / "none", concurrency=[1], requests_per_level=1)
        run_sweep(
            Bench(concurrency=[2], requests_per_level=2, max_tokens=16), base_url=sim.base_url,
            model=None, api_key=key, out_dir=tmp_path / "ok",
        )
    assert level(tmp_path / "ok", "c2")["completed"] == 2
    for path in (tmp_path / "ok").iterdir():
        assert key not in path.read_text()


def test_goodput_is_judged_in_model_time_against_a_simulator(tmp_path: Path) -> None:
    # Model time runs 100x faster than wall time: an SLO 10x the wall TTFT is met in wall time
    # and missed in model time (100x), with room on both sides for a busy machine's spread.
    scale = 0.01
    with running_simulator(profile=KIMI, time_scale=scale, reasoning_parser="kimi_k2", **FAST_START) as sim:
        sweep(sim.base_url, tmp_path / "calibrate", concurrency=[1], requests_per_level=3,
              max_tokens=32, warmup=0)
        wall_ttft = level(tmp_path / "calibrate", "c1")["mean_ttft_ms"]
        slo = 10 * wall_ttft
        sweep(sim.base_url, tmp_path / "slo", concurrency=[1], requests_per_level=3, max_tokens=32,
              warmup=0, slo={"ttft_ms": slo})
    c1 = level(tmp_path / "slo", "c1")
    measured = rows(tmp_path / "slo", "c1")
    assert all(r["ttft_ms"] < slo < r["ttft_ms"] / scale for r in measured)
    assert c1["requests_meeting_slo"] == 0 and c1["slo_attainment"] == 0.0
    assert c1["request_goodput"] == 0.0
    assert c1["normalized"]["request_goodput"] == 0.0
    summary = json.loads((tmp_path / "slo" / "summary.json").read_text())
    assert summary["levels"][0]["request_goodput"] == 0.0
    plain = json.loads((tmp_path / "calibrate" / "summary.json").read_text())
    assert plain["levels"][0]["request_goodput"] is None  # no objectives: null, not ""


def test_percentiles_default_to_50_90_95_99_and_no_content_is_null(tmp_path: Path) -> None:
    with running_simulator(profile="instant", reasoning_parser="kimi_k2", **FAST_START) as sim:
        # 4 tokens of a reasoning model: all reasoning, no content
        sweep(sim.base_url, tmp_path, concurrency=[1], requests_per_level=2, max_tokens=4, warmup=0)
    c1 = level(tmp_path, "c1")
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for p in (50, 90, 95, 99):
            assert isinstance(c1[f"p{p}_{metric}_ms"], float), (p, metric)
    assert c1["total_content_tokens"] == 0
    assert c1["mean_ttft_content_ms"] is None and c1["p95_ttft_content_ms"] is None
    header = (tmp_path / "sweep.csv").read_text().splitlines()[0].split(",")
    assert {"p90_ttft_ms", "p95_ttft_ms", "p95_itl_ms", "p95_e2el_ms"} <= set(header)


def test_a_rate_level_with_a_cap_keeps_at_most_that_many_in_flight(tmp_path: Path) -> None:
    with running_simulator(profile=KIMI, time_scale=0.02, **FAST_START) as sim:
        sweep(sim.base_url, tmp_path, rate=[200.0], max_in_flight=2, requests_per_level=12,
              max_tokens=16, warmup=0)
    r200 = level(tmp_path, "r200")
    assert r200["max_concurrency"] == 2 and r200["completed"] == 12
    assert r200["max_concurrent_requests"] == 2


def test_a_level_the_server_capped_says_what_ran(tmp_path: Path) -> None:
    # --max-num-seqs 2 under C=4: the server runs 2, queues 2, and the level says so
    with running_simulator(profile=KIMI, max_num_seqs=2, time_scale=0.2, **FAST_START) as sim:
        sweep(sim.base_url, tmp_path, concurrency=[1, 4], requests_per_level=8, max_tokens=150,
              metrics_interval=0.1, warmup=0)
    c4, c1 = level(tmp_path, "c4"), level(tmp_path, "c1")
    seen = c4["effective_concurrency"]
    # The simulator counts its queue live: a request sent in the moment between one finishing
    # and the next step's schedule waits as a third (1 running, 3 waiting), which a scrape on
    # a loaded machine can catch.
    waited = int(seen["max_waiting"])
    assert seen["asked"] == 4 and seen["max_running"] == 2 and waited in (2, 3)
    assert seen["client_in_flight"] == 4  # the client held its four: the server capped them
    assert "capped" in c4["flags"]
    assert capped(LevelResult.model_validate(c4)) == f"4 asked, at most 2 running, {waited} waiting"
    assert "capped" not in c1["flags"] and c1["effective_concurrency"]["max_running"] == 1
