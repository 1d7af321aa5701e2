"""The fleet's limiter through real parts: the real vLLM router in front of two simulators,
the router's process paused 150 ms of every 160 ms (SIGSTOP and SIGCONT, as cpulimit does) while
orch bench runs through it: the client waits far beyond the replicas' own latency, and the
level is router-bound, never blamed on the replicas or the client; the same sweep unpaused
is not router-bound."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from fixtures.router import running_router

from orchestrator.bench.sweep import run_sweep
from orchestrator.limits.verdicts import Judge
from orchestrator.plan.models import Bench
from orchestrator.sim.testing import running_simulator

pytestmark = pytest.mark.slow
CONFIG = {"concurrency": [2], "requests_per_level": 24, "max_tokens": 8, "warmup": 0,
          "metrics_interval": "0.1s"}


def paused(pid: int, done: threading.Event) -> None:
    """SIGSTOP 150 ms of every 160 ms until `done`, then SIGCONT."""
    try:
        while not done.is_set():
            os.kill(pid, signal.SIGSTOP)
            done.wait(0.15)
            os.kill(pid, signal.SIGCONT)
            done.wait(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def verdict(tmp_path: Path, name: str, *, pause: bool) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        # replicas that take ~40 ms a request: one never ends within the router's 10 ms
        # awake, so each waits out a pause (~120 ms added, against ~35 ms with instant
        # replicas, which finish several requests per awake window: too near the 20 ms floor
        # when a loaded machine stretches the window)
        sims = [stack.enter_context(running_simulator("m", time_scale=0.3, startup_time_scale=0.001))
                for _ in range(2)]
        router = stack.enter_context(running_router([s.base_url for s in sims], tmp_path / f"{name}.log"))
        done = threading.Event()
        slower = threading.Thread(target=paused, args=(router.process.pid, done), daemon=True)
        if pause:
            slower.start()
        try:
            result = run_sweep(Bench.model_validate(CONFIG), base_url=router.url, model=None, api_key=None,
                               out_dir=tmp_path / name, judge=Judge(), router_metrics=router.metrics_url)
        finally:
            done.set()
            if pause:
                slower.join()
    level = result.levels[0].result
    assert level.completed == 24, level.error_messages
    assert level.limiter is not None
    return {**level.limiter, "added": level.extra("router_added_ms"), "e2e": level.mean_e2el_ms}


def test_a_paused_router_is_named_router_bound(tmp_path: Path) -> None:
    slowed = verdict(tmp_path, "paused", pause=True)
    print(slowed)
    assert slowed["name"] == "router-bound", slowed
    assert slowed["figures"]["router_added_ms"] >= 20 and slowed["added"] >= 0.25 * slowed["e2e"]
    free = verdict(tmp_path, "free", pause=False)
    print(free)
    assert free["name"] != "router-bound", free
