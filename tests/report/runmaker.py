"""Real run folders for the report tests, made the way `orch apply` makes them.

A shipped plan is loaded (layers, --set), the simulator is launched from the plan's own
launch spec (`render_launch`, a real `orch sim serve` process on a loopback port), a real
sweep (`run_sweep`) writes into `<run>/hosts/localhost/bench` (level results, the
per-request JSONL, and the server's /metrics samples of each level unless
`metrics_interval` is None), and the run folder itself is written by `RunFolder` with the
resolved plan (`resolved_plan_yaml`) and this machine's facts (`host_facts`).

Besides the three pivots, two variants make what the pivots do not: `varied_plan` (a longer
sweep, a running-batch limit so requests wait, answers cut at max_tokens, a TTFT objective
so levels carry goodput) and `crashing_plan` (the engine dies mid-sweep: failed requests
and a cut-short level).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from fixtures.ports import free_port

from orchestrator.apply.compile import resolved_plan_yaml
from orchestrator.bench.samplers import Sampler
from orchestrator.bench.sweep import run_sweep
from orchestrator.facts.host import host_facts
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.runs.run_records import HostFactsRecord
from orchestrator.runs.writer import RunFolder
from orchestrator.service.launch import render_launch

REPO = Path(__file__).resolve().parents[2]
SIM_PLANS = {
    "kimi-nvfp4": REPO / "plans/sim/kimi-nvfp4.yaml",
    "minimax-m2.5": REPO / "plans/sim/minimax-m2.5.yaml",
    "kimi-int4": REPO / "plans/sim/kimi-int4.yaml",
}
VENV_BIN = str(Path(sys.executable).parent)
STARTUP_DEADLINE_S = 60.0
# The simulators' start-up, scaled: the shipped plans' 0.03 (a 13-minute start-up in 25 s)
# was most of the session's fixture, and no report test reads a start-up.
STARTUP_TIME_SCALE = 0.001


@dataclass(frozen=True)
class Runs:
    """The session's run folders (see conftest.py)."""

    root: Path
    sim: dict[str, Path]  # "kimi-nvfp4", "minimax-m2.5", "kimi-int4" -> run folder
    real: Path  # plans/kimi-nvfp4.yaml benchmarked against a non-simulated server
    failed: Path  # a newer, failed run of sim-kimi-nvfp4 without results
    varied: Path  # varied_plan's run, under a root of its own (plan names stay the pivots')
    crashed: Path  # crashing_plan's run, under a root of its own

@dataclass
class Server:
    loaded: LoadedPlan
    url: str
    process: subprocess.Popen[bytes] | None = None


def sim_plan(
    plan_file: Path,
    *,
    time_scale: float,
    concurrency: Sequence[int],
    sets: Sequence[str] = (),
    metrics_interval: str | None = "0.05s",
) -> LoadedPlan:
    port = free_port()
    levels = ",".join(str(c) for c in concurrency)
    return load_plan(
        plan_file,
        sets=[
            f"service.port={port}",
            f"service.sim.time_scale={time_scale}",
            f"service.sim.startup_time_scale={STARTUP_TIME_SCALE}",
            f"bench.concurrency=[{levels}]",
            "bench.warmup=0",
            f"bench.metrics_interval={metrics_interval or 'null'}",
            *sets,
        ],
    )


VARIED_CONCURRENCY = (1, 2, 4, 8, 16)  # the pivots stop at 8
VARIED_BATCH_LIMIT = 4  # at C=8 and 16, requests wait for a place in the running batch
VARIED_MAX_TOKENS = 64  # shorter than every simulated answer: finish reason `length`


def varied_plan(time_scale: float = 0.1) -> LoadedPlan:
    """Slow enough (time scale 0.1) that the 50 ms /metrics scrapes see requests running and
    waiting: at C=16 four batches of 64 tokens take about 0.3 s."""
    return sim_plan(
        SIM_PLANS["minimax-m2.5"],
        time_scale=time_scale,
        concurrency=VARIED_CONCURRENCY,
        sets=[
            "name=sim-minimax-varied",
            f"service.args.max-num-seqs={VARIED_BATCH_LIMIT}",
            f"bench.max_tokens={VARIED_MAX_TOKENS}",
            "bench.slo.ttft_ms=5000",
        ],
    )


CRASH_AFTER = 5  # finished requests: C=1 and C=2 complete, C=4 dies after two of its four


def crashing_plan(time_scale: float = 0.005) -> LoadedPlan:
    return sim_plan(
        SIM_PLANS["kimi-int4"],
        time_scale=time_scale,
        concurrency=(1, 2, 4, 8),
        sets=["name=sim-kimi-int4-crash", f"service.sim.crash_after_requests={CRASH_AFTER}"],
    )


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the simulator exited with {process.returncode} during start-up")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"the simulator at {url} was not ready within {STARTUP_DEADLINE_S} s")


@contextlib.contextmanager
def running_sims(plans: Sequence[LoadedPlan]) -> Iterator[list[Server]]:
    """Launch every plan's simulator at once (start-ups overlap), yield when all are ready."""
    servers: list[Server] = []
    try:
        for loaded in plans:
            service = loaded.plan.service
            assert service is not None and service.engine == "sim"
            spec = render_launch(loaded.plan, venv_bin=VENV_BIN)
            process = subprocess.Popen(spec.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            servers.append(Server(loaded, f"http://127.0.0.1:{service.port}", process))
        for server in servers:
            assert server.process is not None
            _wait_ready(server.url, server.process)
        yield servers
    finally:
        for server in servers:
            if server.process is not None:
                server.process.terminate()
        for server in servers:
            if server.process is not None:
                try:
                    server.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.process.kill()
                    server.process.wait()


def record_run(root: Path, server: Server, *, status: str = "complete", simulated: bool = True,
               samplers: Sequence[Sampler] = ()) -> Path:
    """Benchmark `server` with the plan's bench section into a new run folder under `root`
    (`samplers` beside the /metrics scraper, as apply adds the GPU sampler)."""
    loaded = server.loaded
    plan = loaded.plan
    assert plan.bench is not None and plan.service is not None
    folder = RunFolder.create(
        plan.name,
        loaded.digest,
        root=root,
        hosts=["localhost"],
        plan_file=str(loaded.path), layers=loaded.layers, engine=plan.service.engine,
        simulated=simulated,
    )
    folder.write_plan(resolved_plan_yaml(loaded))
    folder.write_facts("localhost", HostFactsRecord(host=host_facts(), probe_seconds=0.01))
    run_sweep(
        plan.bench,
        base_url=server.url,
        model=None,
        api_key=None,
        out_dir=folder.host("localhost").bench.root,
        samplers=samplers,
    )
    folder.finish(status)
    return folder.path


def make_sim_runs(
    root: Path,
    names: Sequence[str] = tuple(SIM_PLANS),
    *,
    time_scale: float = 0.005,
    concurrency: Sequence[int] = (1, 2, 4, 8),
    variants: Sequence[tuple[LoadedPlan, Path]] = (),
    variant_samplers: Sequence[Sequence[Sampler]] = (),
) -> tuple[dict[str, Path], list[Path]]:
    """One complete simulated run per shipped sim plan (name -> run folder), and one run of
    each variant plan under its own root (with its samplers from `variant_samplers`, in
    order); the simulators start together."""
    plans = [sim_plan(SIM_PLANS[name], time_scale=time_scale, concurrency=concurrency) for name in names]
    with running_sims([*plans, *(plan for plan, _ in variants)]) as servers:
        pivots = {name: record_run(root, server) for name, server in zip(names, servers, strict=False)}
        extra = [*variant_samplers, *([()] * (len(variants) - len(variant_samplers)))]
        others = [record_run(where, server, samplers=samplers)
                  for (_, where), server, samplers in zip(variants, servers[len(names):], extra, strict=True)]
    return pivots, others
