"""The limiter named through real parts: a plan whose max-num-seqs is below the concurrency
applied to the simulator (scheduler-cap, from the server's own gauges and the plan's flag;
the `orch plan` command it suggests runs as printed), and orch's load generator slowed on
purpose, as `cpulimit` does (SIGSTOP/SIGCONT of its process), or starved of CPU on a busy core,
named client-bound and not blamed on the server, while the same sweep unslowed is not."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port

from orchestrator.bench.lateness import LATE_SHARE
from orchestrator.engines import engine
from orchestrator.limits.evidence import gather
from orchestrator.limits.rules import LIMITERS, limiter
from orchestrator.limits.verdicts import plan_facts
from orchestrator.runs.run_records import LevelResult
from orchestrator.sim.testing import running_simulator

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "sim" / "kimi-nvfp4.yaml"


def level(folder: Path, label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / f"level-{label}.json").read_text())
    return data


def test_max_num_seqs_below_the_concurrency_is_named_scheduler_cap(tmp_path: Path) -> None:
    sets = ["--set", "service.args.max-num-seqs=4", "--set", f"service.port={free_port()}",
            "--set", f"service.name=orch-limits-{tmp_path.name[-8:]}",
            "--set", "service.sim.startup_time_scale=0.001", "--set", "smoke=[]",
            "--set", "bench.concurrency=[2,16]", "--set", "bench.requests_per_level=48",
            "--set", "bench.max_tokens=96", "--set", "bench.metrics_interval=0.2s"]
    try:
        applied = orch("apply", PLAN, *sets, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    finally:
        orch("stop", PLAN, *sets, cwd=tmp_path)
    run = last_run(tmp_path)
    bench = run / "hosts" / "localhost" / "bench"
    c16 = level(bench, "c16")["limiter"]
    assert (c16["name"], c16["confidence"]) == ("scheduler-cap", "high"), c16
    assert c16["figures"]["max-num-seqs"] == 4 and c16["figures"]["max_running"] == 4
    assert c16["figures"]["max_waiting"] > 0
    assert level(bench, "c2")["limiter"]["name"] != "scheduler-cap"  # 2 ran at once: no cap met
    plateau = json.loads((bench / "summary.json").read_text())["plateau"]
    assert plateau["levels"]["c16"] == "scheduler-cap"
    assert plateau["try"][0]["matrix"] == {"service.args.max-num-seqs": [8, 16]}
    said = applied.stdout
    assert "scheduler-cap" in said and "Why it plateaus:" in said
    # the suggestion as printed runs as it is: orch plan of the run's resolved plan + the matrix
    line = next(x for x in said.splitlines() if x.strip().startswith("orch plan "))
    words = shlex.split(line.strip())
    preview = orch(*words[1:], cwd=tmp_path)
    assert preview.returncode == 0, preview.stdout[-2000:] + preview.stderr[-2000:]
    assert "max-num-seqs" in preview.stdout and "variant" in preview.stdout.lower(), preview.stdout
    compared = orch("compare", run, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "Why it plateaus" in compared.stdout and "scheduler-cap" in compared.stdout


def test_c8_under_max_num_seqs_4_at_time_scale_005_is_scheduler_cap(tmp_path: Path) -> None:
    """The simulated Kimi plan at time scale 0.05, its max-num-seqs 4 under C=8: a level of
    about a second (two scrapes at the plan's 1 s before), scraped at least 10 times: its
    gauges show requests waiting at the cap."""
    sets = ["--set", "service.args.max-num-seqs=4", "--set", f"service.port={free_port()}",
            "--set", f"service.name=orch-cap-{tmp_path.name[-8:]}", "--set", "service.sim.time_scale=0.05",
            "--set", "service.sim.startup_time_scale=0.001", "--set", "smoke=[]",
            "--set", "bench.concurrency=[1,8]", "--set", "bench.requests_per_level=64",
            "--set", "bench.max_tokens=64"]
    try:
        applied = orch("apply", PLAN, *sets, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    finally:
        orch("stop", PLAN, *sets, cwd=tmp_path)
    bench = last_run(tmp_path) / "hosts" / "localhost" / "bench"
    c8 = level(bench, "c8")
    assert c8["limiter"]["name"] == "scheduler-cap", c8["limiter"]
    assert c8["limiter"]["figures"]["max-num-seqs"] == 4 and c8["server_metrics"]["scrapes"] >= 10
    plateau = json.loads((bench / "summary.json").read_text())["plateau"]
    assert plateau["try"][0]["matrix"] == {"service.args.max-num-seqs": [8, 16]}


def test_the_plan_s_cap_and_the_ttft_jump_name_scheduler_cap_without_gauges(tmp_path: Path) -> None:
    """No /metrics at all (`--no-metrics`): C=8 against the simulator's max-num-seqs 4 is
    judged from the plan's cap (in the engine's own flag) and the TTFT's jump from C=1."""
    with running_simulator(time_scale=0.05, startup_time_scale=0.001, max_num_seqs=4) as sim:
        done = subprocess.run([*_bench_argv(sim.base_url, tmp_path, "1,8"), "--no-metrics"],
                              capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    c1, c8 = (LevelResult.model_validate(level(tmp_path, label)) for label in ("c1", "c8"))
    assert c8.server_metrics is None
    facts = plan_facts({"max-num-seqs": 4}, flags=engine("sim").flags)
    judged = limiter(gather(c8, facts, c1))
    assert (judged.name, judged.confidence) == ("scheduler-cap", "medium"), judged.why
    assert judged.figures["max-num-seqs"] == 4 and "--max-num-seqs 4" in judged.why
    assert limiter(gather(c8, facts)).name == "not-enough-evidence"  # no level before: no jump
    assert limiter(gather(c8, None, c1)).name == "not-enough-evidence"  # no plan: no cap to read


def _duty_cycle(pid: int, done: threading.Event, stopped_s: float = 0.15, running_s: float = 0.01) -> None:
    """Let the process run `running_s` of every `stopped_s + running_s` (cpulimit's way)."""
    while not done.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stopped_s)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep(running_s)


def _bench_argv(url: str, out: Path, concurrency: str, prompts: int = 32, tokens: int = 64,
                duration: float | None = None) -> list[str]:
    """`orch bench` of `prompts` requests a level, or (`duration`) of that many seconds."""
    size = ["--duration", f"{duration}s"] if duration else ["--num-prompts", str(prompts)]
    return [sys.executable, "-m", "orchestrator.cli", "bench", "--url", url, "--concurrency", concurrency,
            *size, "--max-tokens", str(tokens), "--out", str(out)]


def _bench(url: str, out: Path, slowed: bool) -> dict[str, Any]:
    with subprocess.Popen(_bench_argv(url, out, "8", 64), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as bench:
        done = threading.Event()
        limiter = threading.Thread(target=_duty_cycle, args=(bench.pid, done), daemon=True)
        if slowed:
            limiter.start()
        try:
            said, _ = bench.communicate(timeout=240)
        finally:
            done.set()
            if slowed:
                limiter.join()
                os.kill(bench.pid, signal.SIGCONT) if bench.poll() is None else None
    assert bench.returncode == 0, said[-3000:]
    if slowed:
        assert "latencies unreliable" in said, said[-3000:]  # the table says so
    return level(out, "c8")


SERVER_LIMITS = set(LIMITERS) - {"client-bound", "not-enough-evidence"}


def test_a_paused_load_generator_is_named_client_bound_never_the_server(tmp_path: Path) -> None:
    """Paused 150 ms of every 160 ms: client-bound, its latencies flagged, whatever a scrape caught."""
    with running_simulator(time_scale=0.05, startup_time_scale=0.001) as sim:
        free = _bench(sim.base_url, tmp_path / "free", slowed=False)
        slowed = _bench(sim.base_url, tmp_path / "slowed", slowed=True)
    assert free["limiter"]["name"] not in SERVER_LIMITS, free["limiter"]
    if free["limiter"]["name"] == "client-bound":  # a busy machine starved the unpaused one too
        figures = free["limiter"]["figures"]
        assert figures["client_late_share"] >= LATE_SHARE or figures["client_loop_lag_ms"] >= 10
    else:  # the control: unpaused, the client kept up and its latencies stand
        assert "latency_unreliable" not in free["flags"]
    assert slowed["limiter"]["name"] == "client-bound", slowed["limiter"]
    assert slowed["limiter"]["confidence"] == "high"
    assert slowed["limiter"]["figures"]["client_late_share"] >= 0.2
    assert "latency_unreliable" in slowed["flags"]
    assert slowed["client_late"]["pauses"] > 0


# The busy process waits for its word (so it can be started before the client and let go
# at once), spins, and ends on its own if the test is gone before it is killed.
SPIN = ("import sys, time\nif sys.stdin.read() == 'go':\n"
        "    end = time.monotonic() + 120\n    while time.monotonic() < end: pass")
STARVED_NICE = 17  # beside one nice-0 process: 23/1047 of the core, ~2%; eight streams need ~17%


def _starve(pid: int, hog: subprocess.Popen[str]) -> None:
    """Renice every thread of `pid` (nice is per thread on Linux; threads started later
    inherit it) and let the busy process on its core go."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.setpriority(os.PRIO_PROCESS, int(tid), STARVED_NICE)
    assert hog.stdin is not None
    hog.stdin.write("go")
    hog.stdin.close()


def test_a_starved_load_generator_is_named_client_bound_never_the_server(tmp_path: Path) -> None:
    """`taskset -c 0` beside a busy process on that core, the client at nice 17 there: ~2% of
    the core for a level of C=8 that needs ~17%. The first level runs at the client's own
    nice, alone (its start-up and lazy imports are not starved); once it ends the client is
    reniced and the busy process let go, and once the starved level ends the busy process is
    killed. A 1 s level (`--duration`): however the kernel spreads the starvation, the client
    falls behind for a whole second: client-bound, never the server, its latencies flagged."""
    hog = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", SPIN], stdin=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        with running_simulator(time_scale=0.05, startup_time_scale=0.001) as sim:
            argv = ["taskset", "-c", "0", *_bench_argv(sim.base_url, tmp_path, "1,8", tokens=32, duration=1.0),
                    "--num-warmups", "0"]
            with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as bench:
                assert bench.stdout is not None
                for line in bench.stdout:
                    said.append(line)
                    if line.strip().startswith("c1:"):
                        _starve(bench.pid, hog)
                    elif line.strip().startswith("c8:"):
                        break
                hog.kill()  # the starved level is done: the rest runs free
                said.append(bench.stdout.read())
                bench.wait(timeout=240)
    finally:
        hog.kill()
        hog.wait()
    assert bench.returncode == 0, "".join(said)[-3000:]
    starved = level(tmp_path, "c8")
    assert starved["limiter"]["name"] == "client-bound", starved["limiter"]  # never the server
    assert starved["limiter"]["figures"]["client_late_share"] >= LATE_SHARE, starved["limiter"]
    assert "latency_unreliable" in starved["flags"], starved["client_late"]
