"""The engine end to end over real HTTP against the known-timing stream server
(benchmarks/stream_server.py, a subprocess on a loopback port)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from stream_server import running_stream_server

from orchestrator.bench.sweep import run_sweep
from orchestrator.cli import main
from orchestrator.events import Event, LevelEnd
from orchestrator.plan.models import Bench

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def sweep(url: str, out: Path, **config: Any) -> Any:
    return run_sweep(
        Bench.model_validate(config), base_url=url, model=None, api_key=None, out_dir=out
    )


def level(out: Path, label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"level-{label}.json").read_text())
    return data


def rows(out: Path, label: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / f"requests-{label}.jsonl").read_text().splitlines()]


def test_a_sweep_measures_tokens_reasoning_and_timing(tmp_path: Path) -> None:
    args = ("--tokens", "16", "--reasoning", "4", "--ttft-ms", "40", "--itl-ms", "4", "--record-timings")
    with running_stream_server(*args) as url:
        result = sweep(url, tmp_path, concurrency=[1, 4], requests_per_level=4, max_tokens=16)
        timings = httpx.get(f"{url}/timings").json()
    assert result.stopped is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "level-c1.json", "level-c4.json", "requests-c1.jsonl", "requests-c4.jsonl", "summary.json", "sweep.csv",
    ]
    c4 = level(tmp_path, "c4")
    for key in ("date", "backend", "model_id", "num_prompts", "request_rate", "max_concurrency", "duration",
                "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
                "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
                "mean_tpot_ms", "p99_itl_ms", "mean_e2el_ms"):
        assert key in c4, key
    assert (c4["completed"], c4["failed"], c4["max_concurrency"], c4["request_rate"]) == (4, 0, 4, "inf")
    assert c4["model_id"] == "stream-test" and c4["simulated"] is False
    assert c4["total_output_tokens"] == 64 and c4["token_source"] == "usage"
    assert (c4["total_reasoning_tokens"], c4["total_content_tokens"]) == (16, 48)
    assert c4["finish_reasons"] == {"length": 4} and c4["hit_max_tokens"] == 4
    assert c4["max_concurrent_requests"] == 4
    requests = rows(tmp_path, "c4")
    assert [r["warmup"] for r in requests] == [True] * 4 + [False] * 4  # C warm-ups at C=4
    # held against when the server wrote each token (4 ms apart as planned, later when the
    # machine is loaded: that is the server's delay, not the client's error)
    written = [timings[r["request_id"]]["write_ns"] for r in requests if not r["warmup"]]
    gaps = [(b - a) / 1e6 for w in written for a, b in itertools.pairwise(w)]
    assert c4["mean_itl_ms"] == pytest.approx(statistics.fmean(gaps), abs=1.0)
    measured = [r for r in requests if not r["warmup"]]
    assert c4["mean_ttft_content_ms"] == pytest.approx(statistics.fmean(r["ttft_content_ms"] for r in measured))
    for row in requests:
        truth = timings[row["request_id"]]
        true_ttft = (truth["write_ns"][0] - truth["recv_ns"]) / 1e6
        # the first content token is the 5th written (after 4 reasoning tokens)
        true_ttft_content = (truth["write_ns"][4] - truth["recv_ns"]) / 1e6
        # stamped on arrival: only loopback delivery and scheduling separate the two (a
        # select-time stamp may lead a late byte by less than one loop iteration); each
        # stamp is held on its own, as a difference of two stamps doubles the client's delay
        assert -2 < row["ttft_ms"] - true_ttft < 15
        assert -2 < row["ttft_content_ms"] - true_ttft_content < 15
        assert row["counted_chunks"] == 16 and row["output_tokens"] == 16
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [lv["level"] for lv in summary["levels"]] == ["c1", "c4"]


def test_without_usage_tokens_are_counted_from_chunks(tmp_path: Path) -> None:
    with running_stream_server("--tokens", "12", "--no-usage") as url:
        sweep(url, tmp_path, concurrency=[2], requests_per_level=2, warmup=0, metrics_interval=None)
    c2 = level(tmp_path, "c2")
    assert c2["token_source"] == "counted" and c2["total_output_tokens"] == 24


def test_open_loop_requests_start_on_their_schedule(tmp_path: Path) -> None:
    with running_stream_server("--tokens", "4") as url:
        sweep(url, tmp_path, rate=[20.0], arrivals="constant", requests_per_level=10, warmup=0)
    r20 = level(tmp_path, "r20")
    assert r20["request_rate"] == 20.0 and r20["max_concurrency"] is None and r20["completed"] == 10
    starts = [r["start_s"] for r in rows(tmp_path, "r20")]
    scheduled = [r["scheduled_s"] for r in rows(tmp_path, "r20")]
    assert scheduled == pytest.approx([i * 0.05 for i in range(10)], abs=1e-6)
    lags = sorted(s - d for s, d in zip(starts, scheduled, strict=True))
    assert lags[0] >= 0  # never early
    assert lags[len(lags) // 2] < 0.01  # and, on a shared machine, mostly on time
    assert r20["client_schedule_lag_ms"]["median"] == pytest.approx(lags[len(lags) // 2 - 1] * 1000, abs=5)


def test_batch_mode_sends_c_at_once_and_waits_for_all(tmp_path: Path) -> None:
    with running_stream_server("--tokens", "8", "--itl-ms", "2") as url:
        sweep(url, tmp_path, mode="batch", concurrency=[4], requests_per_level="2x", warmup=0)
    c4 = level(tmp_path, "c4")
    assert c4["mode"] == "batch" and c4["completed"] == 8 and c4["max_concurrent_requests"] == 4


def test_error_events_are_counted_and_the_sweep_goes_on(tmp_path: Path) -> None:
    with running_stream_server("--tokens", "8", "--error-after", "3") as url:
        result = sweep(url, tmp_path, concurrency=[1, 2], requests_per_level=2, warmup=0)
    assert result.stopped is None and len(result.levels) == 2
    c2 = level(tmp_path, "c2")
    assert c2["failed"] == 2 and c2["completed"] == 0
    assert c2["errors"] == {"stream_error:InternalServerError": 2}
    assert "errors" in c2["flags"]
    assert rows(tmp_path, "c2")[0]["error"] == "injected failure"


def test_each_level_file_is_written_once_as_its_level_ends(tmp_path: Path) -> None:
    at_end: dict[str, tuple[int, bytes]] = {}

    def seen(event: Event) -> None:  # a level's end comes after its file is written
        if isinstance(event, LevelEnd):
            path = tmp_path / f"level-{event.label}.json"
            at_end[event.label] = (path.stat().st_ino, path.read_bytes())

    # one request in flight at a time, 100 ms each: 20 and 40 req/s both run at 10 req/s,
    # so the second level gains nothing from its doubled rate (no_scaling)
    with running_stream_server("--tokens", "4", "--ttft-ms", "100", "--itl-ms", "1") as url:
        run_sweep(Bench.model_validate({"rate": [20, 40], "max_in_flight": 1, "arrivals": "constant",
                                        "requests_per_level": 8, "max_tokens": 4, "warmup": 0}),
                  base_url=url, model=None, api_key=None, out_dir=tmp_path, emit=seen)
    assert sorted(at_end) == ["r20", "r40"]
    for label, (inode, text) in at_end.items():
        path = tmp_path / f"level-{label}.json"
        assert (path.stat().st_ino, path.read_bytes()) == (inode, text), label
    # a loaded machine may also make r40 a little slower than r20 (throughput_drop, once seen)
    # and read the 1 ms token gaps in batches (itl_batched)
    flags = level(tmp_path, "r40")["flags"]
    assert "no_scaling" in flags, flags
    assert set(flags) <= {"no_scaling", "throughput_drop", "itl_batched"}, flags
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["anomalies"] == {"r40": flags}


def test_a_server_that_dies_mid_sweep_keeps_finished_levels_and_marks_the_partial_one(tmp_path: Path) -> None:
    # c1 needs 1 warm-up + 2 requests, c2 2 warm-ups (one per slot) + 4; the server exits
    # after its 7th request, inside c2's measured requests
    with running_stream_server("--tokens", "8", "--itl-ms", "1", "--exit-after-requests", "7") as url:
        result = sweep(url, tmp_path, concurrency=[1, 2, 4], requests_per_level="2x", metrics_interval=None)
    assert result.stopped == "server_gone"
    labels = [lv.spec.label for lv in result.levels]
    # the requests refused in a row that reveal the death fall in c2, or in c4's warm-up
    assert labels in (["c1", "c2"], ["c1", "c2", "c4"])
    c1, last = level(tmp_path, "c1"), level(tmp_path, labels[-1])
    assert c1["partial"] is False and c1["completed"] == 2 and c1["failed"] == 0
    assert last["partial"] is True and last["stopped"] == "server_gone" and "partial" in last["flags"]
    assert all(not lv.partial for lv in result.levels[:-1])
    assert level(tmp_path, "c2")["errors"].get("connect_refused", 0) + level(tmp_path, "c2")["errors"].get(
        "connection_closed", 0
    ) >= 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped"] == "server_gone"


def test_ctrl_c_keeps_finished_levels_and_marks_the_partial_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with running_stream_server("--tokens", "50", "--itl-ms", "10") as url:
        command = [sys.executable, "-m", "orchestrator.cli", "bench", "--url", url, "--concurrency", "1,64",
                   "--requests", "2x", "--warmup", "0", "--no-metrics", "--out", str(out)]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while not (out / "level-c1.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.4)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 130, output
    assert level(out, "c1")["partial"] is False
    c64 = level(out, "c64")
    assert c64["partial"] is True and c64["stopped"] == "interrupted"
    assert "cancelled" in c64["errors"]
    assert "interrupted" in output and "Concurrency" in output


def test_orch_bench_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running_stream_server("--tokens", "8") as url:
        code = main(["bench", "--url", url, "--concurrency", "1,2", "--requests", "2", "--max-tokens", "8",
                     "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Concurrency" in out and "Throughput" in out and "(tok/s)" in out
    assert (tmp_path / "sweep.csv").read_text().count("\n") == 3


def test_an_unreachable_server_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--url", "http://127.0.0.1:9", "--out", str(tmp_path)])
    assert code == 1
    assert "cannot reach http://127.0.0.1:9/v1/models" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_duration_bounded_levels_stop_starting_requests_at_the_deadline(tmp_path: Path) -> None:
    with running_stream_server("--tokens", "10", "--itl-ms", "5") as url:
        sweep(url, tmp_path, concurrency=[2], duration="0.5s", warmup=0)
    c2 = level(tmp_path, "c2")
    assert 0.5 <= c2["duration"] < 1.0
    assert all(r["start_s"] < 0.5 for r in rows(tmp_path, "c2"))
