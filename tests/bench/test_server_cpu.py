"""The server's processes' CPU time per level (bench/server_cpu.py): /proc's stat text read
robustly, a repeat's and a level's figures from the host program's lines, the sampler on a
real process tree (a session leader with a busy and an idle child) over the local transport
and over SSH, a sweep's level file with `server_cpu`, and where apply passes the sampler (a
real server's main process found through its pidfile; never for the simulator)."""

from __future__ import annotations

import ast
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_port
from rich.console import Console

from orchestrator.apply.bench import BenchStage
from orchestrator.bench.samplers import Snapshot
from orchestrator.bench.server_cpu import (
    NO_PYTHON,
    Ended,
    Reading,
    ServerCpuSampler,
    host_program,
    parse_lines,
)
from orchestrator.bench.server_cpu_host import parse_stat
from orchestrator.bench.sweep import run_sweep
from orchestrator.limits.evidence import gather
from orchestrator.metrics import BY_NAME, HOST_FIGURES
from orchestrator.plan.models import Bench, Plan
from orchestrator.runs.run_records import LevelResult
from orchestrator.service.backends import ServicePaths, main_pid
from orchestrator.service.launch import render_launch
from orchestrator.service.step import ServiceStep
from orchestrator.sim.testing import SimulatorProcess, serve_command
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LocalTransport

# -- /proc/PID/stat ------------------------------------------------------------------------

# Recorded on Linux 6.x: a python3 process (session 22033), then vLLM's engine (its name cut
# to 15 characters by the kernel) and names with spaces and parentheses.
PYTHON = ("27527 (python3) R 27524 27524 22033 0 -1 4194304 2846 6541 1 0 6 2 4 3 20 0 1 0 1349142 "
          "16961536 3375 18446744073709551615 94336090497024 94336090497365 140722137204368 0 0 0 0 "
          "16781312 2 0 0 0 17 1 0 0 0 0 0 94336090508720 94336090509336 94336467771392 "
          "140722137209047 140722137209129 140722137209129 140722137210831 0\n")
ENGINE = PYTHON.replace("27527 (python3)", "812 (VLLM::EngineCor)").replace(
    " 22033 0 -1 4194304 2846 6541 1 0 6 2 ", " 790 0 -1 4194304 2846 6541 1 0 52311 1840 ").replace(
    " 1349142 ", " 4411 ")


@pytest.mark.parametrize(("text", "parsed"), [
    (PYTHON, ("python3", 22033, 8, 1349142)),
    (ENGINE, ("VLLM::EngineCor", 790, 54151, 4411)),
    (PYTHON.replace("(python3)", "(tmux: server)"), ("tmux: server", 22033, 8, 1349142)),
    (PYTHON.replace("(python3)", "(a) (b))"), ("a) (b)", 22033, 8, 1349142)),
])
def test_a_stat_line_gives_name_session_cpu_ticks_and_start(text: str, parsed: tuple[str, int, int, int]) -> None:
    assert parse_stat(text) == parsed


@pytest.mark.parametrize("text", ["", "garbage", "1 (sh) S 0 0", "1 sh S 0 0 0 0 -1 0 0 0 0 0 x y"])
def test_what_is_no_stat_line_is_none(text: str) -> None:
    assert parse_stat(text) is None


def test_the_host_program_is_python_38_stdlib_without_orch() -> None:
    tree = ast.parse(host_program(), feature_version=(3, 8))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {str(n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "contextlib", "json", "os", "select", "sys", "typing"}


# -- figures from the host program's lines -------------------------------------------------

HEADER = json.dumps({"pid": 790, "session": 790, "hz": 100, "cores": 2})


def _line(uptime: float, *processes: tuple[int, int, str, int]) -> str:
    return json.dumps({"t": uptime, "p": [list(p) for p in processes]})


def _recorded() -> list[tuple[float, str]]:
    """A 4 s repeat: the API server at one core, its engine at half of one, a helper that
    starts after the first reading (counted from zero), one that ends before the last
    (counted to its last reading), and a stray line; ticks at 100 Hz."""
    return [
        (0.05, HEADER),
        (0.08, _line(1000.0, (790, 10, "vllm", 5000), (812, 20, "VLLM::EngineCor", 900),
                     (900, 30, "pt_main_thread", 40))),
        (1.08, _line(1001.0, (790, 10, "vllm", 5100), (812, 20, "VLLM::EngineCor", 950),
                     (900, 30, "pt_main_thread", 60), (950, 100050, "compile", 30))),
        (2.08, _line(1002.0, (790, 10, "vllm", 5200), (812, 20, "VLLM::EngineCor", 1000),
                     (950, 100050, "compile", 50))),
        (3.0, "a stray line"),
        (4.08, _line(1004.0, (790, 10, "vllm", 5400), (812, 20, "VLLM::EngineCor", 1100),
                     (950, 100050, "compile", 50))),
    ]


def test_a_repeat_counts_each_process_over_the_part_of_it_that_it_lived() -> None:
    snaps = parse_lines(_recorded(), end_s=4.1)
    assert [type(s) for s in snaps] == [Reading] * 4 + [Ended]
    assert snaps[-1].values == {"unparsed": 1.0}
    summary = ServerCpuSampler(LocalTransport(), "pid=", interval=1.0).summarize(snaps)
    assert summary["source"] == "proc" and summary["samples"] == 4 and summary["window_s"] == 4.0
    assert (summary["main_pid"], summary["cores"], summary["clock_ticks"]) == (790, 2, 100)
    assert summary["processes"] == [
        {"pid": 790, "comm": "vllm", "cpu_s": 4.0, "cpu": 1.0},
        {"pid": 812, "comm": "VLLM::EngineCor", "cpu_s": 2.0, "cpu": 0.5},
        {"pid": 950, "comm": "compile", "cpu_s": 0.5, "cpu": 0.125},  # from zero: started since
        {"pid": 900, "comm": "pt_main_thread", "cpu_s": 0.2, "cpu": 0.05},  # to its last reading
    ]
    assert summary["busiest"] == {"pid": 790, "comm": "vllm", "cpu": 1.0}
    assert summary["server_cpu"] == 1.0 and summary["server_cpu_total"] == 1.675
    assert summary["timeline"] == [
        {"t_s": 1.08, "server_cpu": 1.0, "server_cpu_total": 2.0},  # the helper's 0.3 s included
        {"t_s": 2.08, "server_cpu": 1.0, "server_cpu_total": 1.7},
        {"t_s": 4.08, "server_cpu": 1.0, "server_cpu_total": 1.5},
    ]


def test_repeats_merge_into_the_level_block_and_its_figures() -> None:
    sampler = ServerCpuSampler(LocalTransport(), "pid=")
    one = sampler.summarize(parse_lines(_recorded(), end_s=4.1))
    idle = [(0.0, HEADER), (0.1, _line(2000.0, (790, 10, "vllm", 9000), (812, 20, "VLLM::EngineCor", 1100))),
            (4.1, _line(2004.0, (790, 10, "vllm", 9000), (812, 20, "VLLM::EngineCor", 1100)))]
    two = sampler.summarize(parse_lines(idle, end_s=4.2))
    level = sampler.merge([one, two])
    assert level is not None and level["window_s"] == 8.0 and level["samples"] == 6
    assert level["server_cpu"] == 0.5 and level["busiest"]["comm"] == "vllm"  # 4 CPU s in 8 s
    assert level["server_cpu_total"] == pytest.approx(6.7 / 8, abs=1e-4)
    assert [r["server_cpu"] for r in level["repeats"]] == [1.0, 0.0]
    assert level["timeline"] == two["timeline"]
    figures = sampler.level_figures(level, {})
    assert figures == {"server_cpu": 0.5, "server_cpu_total": level["server_cpu_total"]}
    assert sampler.merge([one]) == one


def test_nothing_to_read_says_why_and_makes_no_figure() -> None:
    sampler = ServerCpuSampler(LocalTransport(), "pid=")
    gone = sampler.summarize(parse_lines([(0.1, json.dumps({"error": "the server's main process is not running"}))], 1.0))
    assert gone == {"source": "none", "reason": "the server's main process is not running"}
    silent = sampler.summarize(parse_lines([], 1.0))
    assert silent == {"source": "none", "reason": "the host program gave no answer"}
    crashed = sampler.summarize(parse_lines([(0.1, "Segmentation fault")], 1.0))
    assert crashed["reason"] == "the host program said: Segmentation fault"
    once = sampler.summarize(parse_lines([(0.0, HEADER), (0.1, _line(5.0, (790, 10, "vllm", 1)))], 0.2))
    assert once["samples"] == 0 and "fewer than two readings" in once["reason"]
    assert sampler.merge([gone, gone]) == gone
    assert sampler.level_figures(gone, {}) == {"server_cpu": None, "server_cpu_total": None}
    assert sampler.level_figures(None, {}) == {}


def test_the_level_figures_are_named_once_and_are_no_metric() -> None:
    assert set(HOST_FIGURES) == {"server_cpu", "server_cpu_total"}
    assert not set(HOST_FIGURES) & set(BY_NAME)  # never moved to model time, in no metric table
    level = LevelResult.model_validate({"level": "c1", "server_cpu": 0.97, "server_cpu_total": 1.2,
                                        "normalized": {"time_scale": 0.1}})
    assert level.figure("server_cpu", model_time=False) == 0.97
    assert gather(level).server_cpu == 0.97


# -- on a real process tree ----------------------------------------------------------------

BUSY = "while True: pass"


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[ServicePaths]:
    """A server stand-in as the process backend leaves one: a session leader (sh) with a
    busy child (python3) and an idle one (sleep), its pid and start time in a pidfile."""
    leader = subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{BUSY}' & sleep 300 & wait"],
                              start_new_session=True)
    paths = ServicePaths.for_venv(str(tmp_path / "venv"), "cpu-test")
    Path(paths.state_dir).mkdir(parents=True)
    start = (Path(f"/proc/{leader.pid}/stat").read_text().rsplit(")", 1)[1].split())[19]
    Path(paths.pidfile).write_text(f"{leader.pid} {start}\n")
    time.sleep(0.3)  # its children started
    try:
        yield paths
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


STOPPED: list[float] = []  # when the last _repeat stopped, seconds after its origin


def _repeat(sampler: ServerCpuSampler, seconds: float) -> list[Snapshot]:
    origin = time.perf_counter_ns()
    sampler.start(origin)  # returns once the first reading is in
    time.sleep(seconds)
    STOPPED[:] = [(time.perf_counter_ns() - origin) / 1e9]
    sampler.stop()
    return sampler.snapshots()


@pytest.mark.slow
def test_the_busy_child_reads_one_core_and_the_idle_one_none(transport: Transport, tree: ServicePaths) -> None:
    sampler = ServerCpuSampler(transport, main_pid("process", tree), interval=0.5)
    snaps = _repeat(sampler, 2.0)
    summary = sampler.summarize(snaps)
    assert summary["source"] == "proc", summary
    assert snaps[0].t_s < STOPPED[0] - 2.0  # the first reading was in before the repeat went on
    assert snaps[-2].t_s >= STOPPED[0] and snaps[-1].t_s == pytest.approx(STOPPED[0], abs=0.3)  # one at the stop
    assert 0 < summary["host_cpu_busy"] <= 1  # the whole host's CPUs, /proc/stat
    assert summary["cores"] == os.cpu_count() and summary["clock_ticks"] == os.sysconf("SC_CLK_TCK")
    assert summary["samples"] >= 3 and 1.0 <= summary["window_s"] <= 2.2  # a last reading at the stop
    by_name = {p["comm"]: p for p in summary["processes"]}
    assert set(by_name) == {"sh", Path(sys.executable).name[:15], "sleep"}
    busy = by_name[Path(sys.executable).name[:15]]
    # one core when it has one; on a 2-core machine shared with other work, what it got
    assert 0.2 <= busy["cpu"] <= 1.1, summary
    assert by_name["sleep"]["cpu"] <= 0.05 and by_name["sh"]["cpu"] <= 0.05
    assert summary["busiest"]["pid"] == busy["pid"] and summary["server_cpu"] == busy["cpu"]
    assert transport.round_trips == 1  # one held command per repeat, whatever the readings


@pytest.mark.slow
def test_a_server_that_is_gone_or_a_host_without_python_says_why(
        tree: ServicePaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    never = ServicePaths.for_venv(str(tmp_path / "other"), "never-started")
    sampler = ServerCpuSampler(LocalTransport(), main_pid("process", never), interval=0)
    assert sampler.summarize(_repeat(sampler, 0.1)) == {"source": "none", "reason": "the server's main process is not running"}
    # systemd's MainPID: 0 for a unit that is down, nothing where systemd does not run (here)
    down = ServerCpuSampler(LocalTransport(), main_pid("systemd", never), interval=0)
    assert down.summarize(_repeat(down, 0.1))["reason"] == "the server's main process is not running"
    # a pidfile naming a process that is not the one orch started (another start time)
    stale = tree.pidfile
    pid = Path(stale).read_text().split()[0]
    Path(stale).write_text(f"{pid} 1\n")
    sampler = ServerCpuSampler(LocalTransport(), main_pid("process", tree), interval=0)
    assert sampler.summarize(_repeat(sampler, 0.1))["reason"] == "the server's main process is not running"
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sampler = ServerCpuSampler(LocalTransport(shell="/bin/sh"), "pid=1", interval=0)
    assert sampler.summarize(_repeat(sampler, 0.1)) == {"source": "none", "reason": NO_PYTHON}


def _python38() -> str | None:
    candidates = [shutil.which("python3.8"),
                  *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.8*/bin/python3.8")))]
    return next((p for p in filter(None, candidates)
                 if subprocess.run([p, "-c", "pass"], capture_output=True).returncode == 0), None)


def test_the_host_program_runs_on_python_38(tree: ServicePaths) -> None:
    python = _python38()
    if python is None:
        pytest.skip("no Python 3.8 here")
    pid = Path(tree.pidfile).read_text().split()[0]
    done = subprocess.run([python, "-S", "-c", host_program(), pid, "0"], input=b"",
                          capture_output=True, check=True, timeout=30)
    header, first, last = (json.loads(line) for line in done.stdout.decode().splitlines())
    assert header["pid"] == header["session"] == int(pid)
    assert len(first["p"]) == 3 and last["t"] >= first["t"]


# -- in a sweep, and where apply passes it --------------------------------------------------


@pytest.fixture
def own_session_simulator(tmp_path: Path) -> Iterator[SimulatorProcess]:
    """The simulator as the process backend starts a server: leading a session of its own."""
    port = free_port()
    argv = serve_command("m", port, profile="instant", time_scale=0.01, startup_time_scale=0.001)
    log = tmp_path / "sim.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    sim = SimulatorProcess(process, port, log, argv)
    try:
        sim.wait_ready(60)
        yield sim
    finally:
        sim.stop()


@pytest.mark.slow
def test_a_sweep_s_level_file_has_the_server_s_cpu(tmp_path: Path, own_session_simulator: SimulatorProcess) -> None:
    config = Bench.model_validate({"concurrency": [4], "duration": "2s", "repeats": 2, "warmup": 0,
                                   "max_tokens": 64, "gpu_telemetry": None})
    sampler = ServerCpuSampler(LocalTransport(), f"pid={own_session_simulator.pid}", interval=0.5)
    out = tmp_path / "out"
    run_sweep(config, base_url=own_session_simulator.base_url, model=None, api_key=None, out_dir=out,
              samplers=[sampler])
    level = json.loads((out / "level-c4.json").read_text())
    block = level["server_processes"]
    assert block["source"] == "proc" and block["main_pid"] == own_session_simulator.pid
    assert len(block["repeats"]) == 2 and block["samples"] >= 6
    assert block["busiest"]["pid"] == own_session_simulator.pid  # it serves on one process
    assert 0 < level["server_cpu"] <= 1.5 and level["server_cpu"] == block["server_cpu"]
    assert level["server_cpu_total"] >= level["server_cpu"]
    assert [r["server_cpu"] is not None for r in level["repeats"]] == [True, True]
    assert "server_cpu" not in level["normalized"]  # the host's own time, not the model's
    assert LevelResult.model_validate(level).figure("server_cpu", model_time=False) == level["server_cpu"]


def _stage(tmp_path: Path, engine: str) -> BenchStage:
    plan = Plan.model_validate({
        "name": "p", "python": {"venv": str(tmp_path / "venv")},
        "service": {"engine": engine, "model": "m", "backend": "process", "name": "cpu-test"},
        "bench": {"concurrency": [1]},
    })
    step = ServiceStep(plan, render_launch(plan, venv_bin=f"{tmp_path}/venv/bin"), {}, file_digests={})
    return BenchStage(plan, step, None, Console(), None)


@pytest.mark.slow
def test_apply_samples_a_real_server_through_its_pidfile_and_never_the_simulator(
        tmp_path: Path, tree: ServicePaths) -> None:
    stage = _stage(tmp_path, "vllm")
    assert stage.step.paths.pidfile == tree.pidfile  # the process tree stands in for its server
    (sampler,) = stage._server_cpu(LocalTransport())
    assert isinstance(sampler, ServerCpuSampler)
    summary = sampler.summarize(_repeat(sampler, 1.0))
    assert summary["source"] == "proc" and summary["server_cpu"] >= 0.3, summary
    assert _stage(tmp_path, "sim")._server_cpu(LocalTransport()) == []


@pytest.mark.slow
def test_a_simulated_plan_applied_has_no_server_processes_block(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {"localhost": {"connection": "local"}}}))
    plan = tmp_path / "sim.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "sim-cpu", "hosts": "localhost",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": "python3", "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": free_port(),
                    "backend": "process", "name": f"cpu-{tmp_path.name[-8:]}",
                    "sim": {"profile": "instant", "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1], "requests_per_level": 4, "warmup": 0, "max_tokens": 16},
    }))
    try:
        applied = orch("apply", plan, "-i", inventory, cwd=tmp_path)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        level: dict[str, Any] = json.loads((last_run(tmp_path) / "hosts/localhost/bench/level-c1.json").read_text())
        assert level["simulated"] is True
        assert "server_processes" not in level and "server_cpu" not in level
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path)
