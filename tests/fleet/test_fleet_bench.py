"""A fleet benchmarked through the real vLLM router (`vllm-router`) in front of three
simulator replicas: `orch bench --url <router> --router-metrics <its metrics>` records, per
level, the requests each replica was sent as the router counted them (round robin: equal
shares that sum to the requests sent), each replica's own /metrics, and the router's latency;
one replica made slow is named by the limiter (`slow-replica`, through the bench module's
API); one killed mid-level shows as failed requests of that replica and the router's retries,
named in the table."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fixtures.orchcli import orch
from fixtures.router import Router, running_router
from rich.console import Console

from orchestrator.bench.sweep import run_sweep
from orchestrator.limits.verdicts import Judge
from orchestrator.plan.models import Bench
from orchestrator.sim.testing import SimulatorProcess, running_simulator

pytestmark = pytest.mark.slow
FAST_START = {"startup_time_scale": 0.001}


@contextlib.contextmanager
def fleet(log: Path, options: Sequence[dict[str, Any]]) -> Iterator[tuple[Router, list[SimulatorProcess]]]:
    """A simulator per `options` (each's `orch sim serve` options), the router in front."""
    with contextlib.ExitStack() as stack:
        sims = [stack.enter_context(running_simulator("m", **{"profile": "instant", **FAST_START, **one}))
                for one in options]
        router = stack.enter_context(running_router([s.base_url for s in sims], log))
        yield router, sims


def level(out: Path, label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"level-{label}.json").read_text())
    return data


def by_url(block: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["url"]: row for row in block["replicas"]}


def test_round_robin_shares_sum_to_the_requests_sent(tmp_path: Path) -> None:
    with fleet(tmp_path / "router.log", [{}, {}, {}]) as (router, sims):
        done = orch("bench", "--url", router.url, "--router-metrics", router.metrics_url,
                    "--router-policy", "round_robin", "--concurrency", "1,3", "--requests", "24",
                    "--max-tokens", "16", "--result-dir", tmp_path / "out", cwd=tmp_path)
    print(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for label in ("c1", "c3"):
        result = level(tmp_path / "out", label)
        block = result["router"]
        rows = by_url(block)
        assert sorted(rows) == sorted(s.base_url for s in sims)
        assert [rows[s.base_url]["processed"] for s in sims] == [8.0, 8.0, 8.0]  # round robin
        assert sum(r["processed"] for r in rows.values()) == result["num_prompts"] == 24
        assert block["requests"] == 24 and block["retries"] == 0 and block["policy"] == "round_robin"
        for row in rows.values():
            assert row["succeeded"] == 8.0 and row["failed"] == 0.0 and row["share"] == pytest.approx(1 / 3, abs=1e-3)
            assert row["server"]["delta_requests_finished"] == 8.0  # the replica's own count agrees
            assert row["server"]["delta_generation_tokens"] == 8 * 16
            assert row["simulated"] and row["gpu"]["reason"] == "a simulator replica has no GPU"
        assert block["duration_mean_ms"] > 0 and block["cpu"] is not None  # a router on loopback
        assert result["router_added_ms"] == pytest.approx(
            result["mean_e2el_ms"] - sum(r["server"]["mean_e2e_ms"] for r in rows.values()) / 3, abs=0.01)
        assert result["server_metrics"] is None  # the router's /metrics is one worker's: not scraped
        assert result["simulated"] and result["normalized"]  # every replica at time scale 0.001
    assert "Per replica" in done.stdout and "8/8/8" in done.stdout


def test_a_slow_replica_is_named_by_the_limiter(tmp_path: Path) -> None:
    """One replica at five times the others' time scale (the same model, a slower machine):
    the router's round robin gives it a third of the requests, and it is named."""
    slow = {"profile": "tiny-qwen2-vllm-cpu-2-cores", "time_scale": 5.0}
    with fleet(tmp_path / "router.log", [{**slow, "time_scale": 1.0}, {**slow, "time_scale": 1.0}, slow]) \
            as (router, sims):
        config = Bench.model_validate({"concurrency": [3], "requests_per_level": 18, "max_tokens": 16,
                                       "warmup": 0, "metrics_interval": "0.1s"})
        result = run_sweep(config, base_url=router.url, model=None, api_key=None, out_dir=tmp_path / "out",
                           judge=Judge(), router_metrics=router.metrics_url, router_policy="round_robin")
    Console(width=160).print(result.render(width=160))
    block = result.levels[0].result.extra("router")
    assert [by_url(block)[s.base_url]["processed"] for s in sims] == [6.0, 6.0, 6.0]
    # simulators at different time scales have no one model time: the figures are wall time
    assert not result.server.simulated and result.levels[0].result.normalized is None
    verdict = result.levels[0].result.limiter
    print(verdict)
    assert verdict is not None and verdict["name"] == "slow-replica", verdict
    assert verdict["figures"]["replica"] == sims[2].base_url, verdict
    assert sims[2].base_url.split("://")[1] in verdict["why"]


def test_a_replica_killed_mid_level_shows_as_its_failed_requests(tmp_path: Path) -> None:
    with fleet(tmp_path / "router.log", [{}, {}, {"crash_after_requests": 2}]) as (router, sims):
        done = orch("bench", "--url", router.url, "--router-metrics", router.metrics_url,
                    "--concurrency", "1", "--requests", "18", "--num-warmups", "0",
                    "--max-tokens", "16", "--max-failed-fraction", "1",
                    "--result-dir", tmp_path / "out", cwd=tmp_path)
    print(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = level(tmp_path / "out", "c1")
    rows = by_url(result["router"])
    dead, alive = rows[sims[2].base_url], [rows[s.base_url] for s in sims[:2]]
    # the request it died in had its answer's headers: the router counts it a success, the
    # client a failure; every later attempt on it failed and was retried on another replica
    assert dead["failed"] >= 1 and dead["failed"] == result["router"]["retries"], dead
    assert result["failed"] == 1 and result["completed"] == 17
    assert all(r["failed"] == 0 for r in alive), alive
    assert sum(r["processed"] for r in rows.values()) == 18 + result["router"]["retries"]
    said = f"replica {sims[2].base_url.split('://')[1]}: {dead['failed']:g} failed, router retried"
    assert said in notes_column(done.stdout)


def notes_column(table: str) -> str:
    """The sweep table's last column, its wrapped lines joined."""
    cells = [line.split("│")[-2].strip() for line in table.splitlines() if line.count("│") > 2]
    return " ".join(cell for cell in cells if cell)


def test_every_replica_queueing_at_its_cap_is_a_scheduler_cap_not_the_router(tmp_path: Path) -> None:
    """Two replicas of two running slots each, eight requests in flight in round robin: both
    queue, evenly; the server rules read the replica that queued most."""
    capped = {"profile": "tiny-qwen2-vllm-cpu-2-cores", "time_scale": 1.0, "max_num_seqs": 2}
    with fleet(tmp_path / "router.log", [capped, capped]) as (router, sims):
        config = Bench.model_validate({"concurrency": [8], "requests_per_level": 32, "max_tokens": 32,
                                       "warmup": 0, "metrics_interval": "0.05s"})
        result = run_sweep(config, base_url=router.url, model=None, api_key=None, out_dir=tmp_path / "out",
                           judge=Judge(), router_metrics=router.metrics_url, router_policy="round_robin")
    level = result.levels[0].result
    rows = by_url(level.extra("router"))
    assert [rows[s.base_url]["processed"] for s in sims] == [16.0, 16.0]
    assert all(row["server"]["max_running"] == 2 and row["server"]["max_waiting"] > 0 for row in rows.values())
    assert level.limiter is not None and level.limiter["name"] == "scheduler-cap", level.limiter
    print(level.limiter["why"])
