"""A level's load split across client processes (`bench.client_processes`), against the
simulator (`orch sim serve`, a real subprocess): the totals add up to the requests asked,
the merged percentiles are those of the union of the processes' records (the JSONL rows
say which process sent each), bad values are refused with the flag named, and a process
that dies or a Ctrl-C ends the level cleanly, with no process left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.bench.client_shares import busiest_cpu, merge, shares, split_evenly
from orchestrator.bench.load import RequestRun, Shape
from orchestrator.bench.request_record import RequestRecord
from orchestrator.bench.stats import summarize
from orchestrator.bench.sweep import SweepResult, run_sweep
from orchestrator.events import Event, LevelProgress
from orchestrator.plan.models import Bench
from orchestrator.sim.testing import running_simulator

FAST_START: dict[str, Any] = {"startup_time_scale": 0.001}


def sweep(url: str, out: Path, emit: Any = None, **config: Any) -> SweepResult:
    return run_sweep(Bench.model_validate(config), base_url=url, model=None, api_key=None,
                     out_dir=out, emit=emit)


def level(out: Path, label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"level-{label}.json").read_text())
    return data


def rows(out: Path, label: str) -> list[dict[str, Any]]:
    lines = (out / f"requests-{label}.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if not r["warmup"]]


def test_shares_split_concurrency_and_requests_exactly() -> None:
    assert split_evenly(7, 3) == [3, 2, 2] and split_evenly(2, 2) == [1, 1]
    parts = shares(Shape("closed", concurrency=7, count=10), 3)
    assert [p.concurrency for p in parts] == [3, 2, 2] and [p.count for p in parts] == [4, 3, 3]
    rate = shares(Shape("rate", rate=10.0, count=9, max_in_flight=5), 2)
    assert [p.part for p in rate] == [(0, 2), (1, 2)] and [p.max_in_flight for p in rate] == [3, 2]
    with pytest.raises(ValueError, match="concurrency >= 3"):
        shares(Shape("closed", concurrency=2, count=4), 3)


def test_merge_spans_from_the_first_start_to_the_last_end() -> None:
    def run(origin: int, end: int, indexes: list[int], cpu: float, lags: list[float],
            stopped: str | None = None) -> RequestRun:
        return RequestRun(records=[RequestRecord(f"r{i}", index=i) for i in indexes],
                          origin_ns=origin, end_ns=end, cpu_s=cpu, loop_lags_s=lags,
                          stopped=stopped)

    calm = run(1_000, 3_000_000_000, [0, 2, 4], 0.5, [0.001, 0.002])
    late = run(2_000, 2_000_000_000, [1, 3], 0.25, [0.2, 0.3], stopped="interrupted")
    merged = merge([calm, late])
    assert [r.index for r in merged.records] == [0, 1, 2, 3, 4]
    assert (merged.origin_ns, merged.end_ns, merged.cpu_s) == (1_000, 3_000_000_000, 0.75)
    assert merged.stopped == "interrupted" and merged.loop_lags_s == [0.2, 0.3]
    assert merged.parts == [calm, late]
    assert busiest_cpu([merged]) == pytest.approx(0.5 / (3 - 1e-6))  # its own core, its own span


@pytest.mark.slow
def test_two_processes_merge_their_records_exactly(tmp_path: Path) -> None:
    with running_simulator(profile="instant", **FAST_START) as sim:
        result = sweep(sim.base_url, tmp_path, concurrency=[8], requests_per_level=41,
                       max_tokens=48, client_processes=2, percentiles=[50, 90, 99])
    assert result.stopped is None
    c8, measured = level(tmp_path, "c8"), rows(tmp_path, "c8")
    assert c8["completed"] == 41 and c8["failed"] == 0
    assert sorted(r["index"] for r in measured) == list(range(41))
    block = c8["client_processes"]
    assert block["count"] == 2
    each = block["processes"]
    assert [p["concurrency"] for p in each] == [4, 4]
    assert [p["completed"] for p in each] == [21, 20]
    for process in each:  # each process's figures are those of the rows it sent
        own = [r for r in measured if r["client_process"] == process["process"]]
        assert len(own) == process["completed"]
        assert sum(r["output_tokens"] for r in own) == process["total_output_tokens"]
    assert c8["total_output_tokens"] == sum(r["output_tokens"] for r in measured) \
        == sum(p["total_output_tokens"] for p in each)
    assert c8["max_concurrent_requests"] <= 8
    # the span of the union, not one process's: at least as long as the longest
    assert c8["duration"] >= max(p["duration"] for p in each)
    for metric in ("ttft", "e2el"):
        union = summarize([r[f"{metric}_ms"] for r in measured], [50, 90, 99])
        for stat in ("mean", "median", "p90", "p99"):
            assert c8[f"{stat}_{metric}_ms"] == pytest.approx(union[stat], abs=1e-4)
    gaps = summarize([x for r in measured for x in r["itls_ms"]], [50, 90, 99])
    assert c8["p99_itl_ms"] == pytest.approx(gaps["p99"], abs=2e-3)
    # the limiter reads the busiest process's core and the latest one's loop
    assert c8["client_cpu_utilization"] == max(p["cpu_utilization"] for p in each)
    assert c8["client_late"]["share"] == max(p["late"]["share"] for p in each)


@pytest.mark.slow
def test_a_rate_level_splits_its_schedule(tmp_path: Path) -> None:
    with running_simulator(profile="instant", **FAST_START) as sim:
        sweep(sim.base_url, tmp_path, rate=[400.0], requests_per_level=30, max_tokens=16,
              client_processes=2, arrivals="constant")
    r400, measured = level(tmp_path, "r400"), rows(tmp_path, "r400")
    assert r400["completed"] == 30
    assert sorted(r["index"] for r in measured) == list(range(30))
    each = r400["client_processes"]["processes"]
    assert [p["rate"] for p in each] == [200.0, 200.0]
    assert [p["completed"] for p in each] == [15, 15]
    # process k sent the level's arrivals k, k + 2, ...: the one-process schedule, shared
    assert {r["index"] % 2 for r in measured if r["client_process"] == 1} == {1}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "bench", "--url",
                           "http://127.0.0.1:9", *args], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize(("args", "said"), [
    (["--client-processes", "0"], "--client-processes: Input should be greater than or equal to 1"),
    (["--client-processes", "-3"], "--client-processes: Input should be greater than or equal to 1"),
    (["--concurrency", "2,16", "--client-processes", "4"],
     "--client-processes: 4 client processes need at least 4 requests in flight, but the lowest "
     "concurrency level is 2"),
    (["--request-rate", "5", "--max-concurrency", "1", "--client-processes", "2"],
     "--client-processes: 2 client processes need at least 2 requests in flight, but "
     "max_in_flight is 1"),
])
def test_bad_process_counts_are_refused(args: list[str], said: str) -> None:
    done = _cli(*args)
    assert done.returncode == 64, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_plan_refuses_more_processes_than_its_lowest_level() -> None:
    with pytest.raises(ValueError, match="lowest concurrency level is 1"):
        Bench.model_validate({"client_processes": 2})  # the default levels start at 1
    assert Bench.model_validate({"client_processes": 2, "rate": [4.0]}).client_processes == 2
    with pytest.raises(ValueError, match=r"auto\.start is 1"):
        Bench.model_validate({"client_processes": 2, "concurrency": "auto"})


def _workers() -> list[int]:
    """This process's client processes still alive (zombies included: not reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = next(int(line.split()[1]) for line in status.splitlines()
                      if line.startswith("PPid:"))
        if parent == os.getpid() and b"orchestrator.bench.client_worker" in command:
            found.append(int(entry.name))
    return found


def _on_first_progress(act: Any) -> Any:
    """An observer that acts once, when the processes say tokens are streaming."""
    acted: list[Event] = []

    def emit(event: Event) -> None:
        if isinstance(event, LevelProgress) and event.streamed_tok_s > 0 and not acted:
            acted.append(event)
            act()
    return emit


SLOW: dict[str, Any] = {"concurrency": [4], "requests_per_level": 8, "max_tokens": 4000, "warmup": 0,
        "ignore_eos": True, "client_processes": 2}


@pytest.mark.slow
def test_a_process_that_dies_fails_the_level_cleanly(tmp_path: Path) -> None:
    killed: list[int] = []

    def kill_one() -> None:
        pid = min(_workers())
        killed.append(pid)
        os.kill(pid, signal.SIGKILL)

    with running_simulator(time_scale=0.05, **FAST_START) as sim:
        result = sweep(sim.base_url, tmp_path, _on_first_progress(kill_one), **SLOW)
    assert killed
    assert result.stopped == "client_failed"
    verdict = result.verdict(0.05) or ""
    assert re.search(r"a client process failed \(client process [12] of 2 ended before it "
                     r"sent its records \(exit code -9\)\)", verdict), verdict
    c4 = level(tmp_path, "c4")
    assert c4["partial"] is True and c4["stopped"] == "client_failed"
    assert c4["completed"] < 8
    assert _workers() == []  # every process reaped: none left behind


@pytest.mark.slow
def test_ctrl_c_stops_every_process_and_keeps_the_level_partial(tmp_path: Path) -> None:
    with running_simulator(time_scale=0.05, **FAST_START) as sim:
        result = sweep(sim.base_url, tmp_path,
                       _on_first_progress(lambda: os.kill(os.getpid(), signal.SIGINT)), **SLOW)
    assert result.stopped == "interrupted"
    c4 = level(tmp_path, "c4")
    assert c4["partial"] is True and c4["stopped"] == "interrupted"
    each = c4["client_processes"]["processes"]
    assert [p["stopped"] for p in each] == ["interrupted", "interrupted"]
    cancelled = [r for r in rows(tmp_path, "c4") if r["error_kind"] == "cancelled"]
    assert {r["client_process"] for r in cancelled} == {0, 1}  # both were told at once
    assert _workers() == []


@pytest.mark.slow
def test_a_process_that_cannot_start_fails_the_level(tmp_path: Path) -> None:
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text('{"prompt": "Say hello."}\n')

    def remove(event: Event) -> None:  # read by the sweep already, not yet by its processes
        dataset.unlink(missing_ok=True)

    with running_simulator(profile="instant", **FAST_START) as sim:
        result = sweep(sim.base_url, tmp_path / "out", remove, concurrency=[2],
                       requests_per_level=4, max_tokens=8, client_processes=2,
                       dataset=str(dataset))
    assert result.stopped == "client_failed"
    assert "prompts.jsonl" in (result.stop_detail or "")
    assert level(tmp_path / "out", "c2")["partial"] is True
    assert _workers() == []


@pytest.mark.slow
def test_one_paused_process_makes_the_level_client_bound(tmp_path: Path) -> None:
    """One process stopped (SIGSTOP) while the other sends its whole share: the level's
    lateness is the paused one's, and the limiter names the level client-bound."""
    from orchestrator.limits.verdicts import Judge

    paused: list[int] = []

    def emit(event: Event) -> None:
        if not isinstance(event, LevelProgress):
            return
        if not paused and event.streamed_tok_s > 0:
            paused.append(min(_workers()))
            os.kill(paused[0], signal.SIGSTOP)
        elif len(paused) == 1 and event.done >= 20:  # the other one's share is done
            paused.append(paused[0])
            os.kill(paused[0], signal.SIGCONT)

    # short answers: the paused process's streams fit its socket buffers, so the server
    # goes on serving the other process meanwhile
    config = {**SLOW, "requests_per_level": 40, "max_tokens": 128}
    with running_simulator(time_scale=0.05, **FAST_START) as sim:
        result = run_sweep(Bench.model_validate(config), base_url=sim.base_url, model=None,
                           api_key=None, out_dir=tmp_path, emit=emit, judge=Judge())
    assert len(paused) == 2 and result.stopped is None
    c4 = level(tmp_path, "c4")
    assert c4["completed"] == 40
    shares_ = sorted(p["late"]["share"] for p in c4["client_processes"]["processes"])
    assert shares_[0] < 0.2 <= shares_[1]  # one starved, one not
    assert c4["client_late"]["share"] == shares_[1]
    assert c4["limiter"]["name"] == "client-bound"
    assert "latency_unreliable" in c4["flags"]
