"""Capacity of the simulator: it must never be what a benchmark measures.

1. SSE chunks per second with the `instant` profile, the server pinned to one core and the
   client (plain sockets, counting `data: ` events) pinned to another. Goal: >= 50,000.
2. Step timing under the kimi profile at C=128 (streamed, max_tokens 1024, the motivating
   prompt): the wall time until the last request finishes and the mean time between one
   stream's tokens, against what the engine model predicts (`calibration.batch_run`) at the
   same time scale. Goal: within 2%.
3. With --calibration: the model's batch throughput per profile (virtual time, instant).

    .venv/bin/python benchmarks/sim_capacity.py [--streams 64] [--scale 0.2] [--calibration]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.sim.calibration import GUIDE_PROMPT, batch_run
from orchestrator.sim.profiles import PROFILES, Profile
from orchestrator.sim.testing import SimulatorProcess, free_port, raw_batch, serve_command
from orchestrator.sim.textgen import chat_prompt_tokens

KIMI = "kimi-k2.5-nvfp4-8x-rtx-pro-6000"


def start_pinned(cpu: int | None, **options: object) -> SimulatorProcess:
    port = free_port()
    argv = serve_command("bench/model", port, startup_time_scale=0.001, **options)
    log_path = Path(f"/tmp/orch-sim-capacity-{port}.log")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}

    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=pin)
    sim = SimulatorProcess(process, port, log_path, argv)
    sim.wait_ready(60)
    return sim


def cpus() -> tuple[int | None, int | None]:
    available = sorted(os.sched_getaffinity(0))
    if len(available) >= 2:
        return available[0], available[1]
    return None, None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc): the rate per CPU second does not
    depend on what else runs on this shared machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chunk_rate(streams: int, tokens: int, server_cpu: int | None) -> tuple[float, int, float]:
    sim = start_pinned(server_cpu, profile="instant", time_scale=1.0, disable_log_stats=True)
    try:
        body = {
            "messages": [{"role": "user", "content": GUIDE_PROMPT}],
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        asyncio.run(raw_batch(sim.base_url, {**body, "max_tokens": 50}, 4))  # warm-up
        cpu_before = cpu_seconds(sim.pid)
        started = time.monotonic()
        results = asyncio.run(raw_batch(sim.base_url, body, streams))
        wall = time.monotonic() - started
        cpu = cpu_seconds(sim.pid) - cpu_before
        events = sum(r.events for r in results)
        assert all(r.status == 200 for r in results), [r.status for r in results]
        return events / wall, events, events / cpu if cpu else float("inf")
    finally:
        sim.stop()


def step_timing(scale: float, concurrency: int, server_cpu: int | None) -> dict[str, float]:
    profile = PROFILES[KIMI]
    sim = start_pinned(server_cpu, profile=KIMI, time_scale=scale, reasoning_parser="kimi_k2",
                       disable_log_stats=True)  # fmt: skip
    try:
        body = {
            "messages": [{"role": "user", "content": GUIDE_PROMPT}],
            "max_tokens": 1024,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        results = asyncio.run(raw_batch(sim.base_url, body, concurrency))
        started = min(r.started for r in results)
        wall = max(r.finished for r in results) - started
        model = batch_run(profile, concurrency, first_key=0)
        # one stream's token cadence: (last event - first event) / (tokens - 1)
        longest = max(results, key=lambda r: r.events)
        assert longest.first_event is not None
        found = re.search(rb'"completion_tokens":(\d+)', longest.body)
        assert found is not None
        tokens = int(found.group(1))
        cadence = (longest.finished - longest.first_event) / max(1, tokens - 1)
        model_cadence = (model.wall_seconds - _first_step(profile, concurrency)) / (model.steps - 1)
        return {
            "wall": wall,
            "model_wall": model.wall_seconds * scale,
            "throughput": model.generated_tokens / wall * scale,
            "model_throughput": model.throughput,
            "cadence_ms": cadence * 1000,
            "model_cadence_ms": model_cadence * scale * 1000,
        }
    finally:
        sim.stop()


def _first_step(profile: Profile, concurrency: int) -> float:
    """Model seconds of the step that admits the whole batch (prefill included)."""
    return profile.step_seconds(concurrency, concurrency * chat_prompt_tokens([GUIDE_PROMPT]))


def calibration_table() -> None:
    print("\nModel throughput (tok/s, batch mode, max_tokens 1024, virtual time)")
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    print(f"{'profile':34s}" + "".join(f"{'C=' + str(c):>9s}" for c in levels) + "   targets")
    for name, profile in PROFILES.items():
        if not profile.targets:
            continue
        row = "".join(f"{batch_run(profile, c).throughput:9.1f}" for c in levels)
        targets = ", ".join(f"C={c}: {t:,.1f}" for c, t in profile.targets.items())
        print(f"{name:34s}{row}   {targets}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=64, help="concurrent streams (instant)")
    parser.add_argument("--tokens", type=int, default=20000, help="tokens per stream (instant)")
    parser.add_argument("--scale", type=float, default=0.2, help="time scale of the kimi run")
    parser.add_argument("--calibration", action="store_true", help="also print the model table")
    args = parser.parse_args()
    server_cpu, client_cpu = cpus()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    rate, events, per_cpu = chunk_rate(args.streams, args.tokens, server_cpu)
    timing = step_timing(args.scale, 128, server_cpu)
    wall_err = 100 * (timing["wall"] / timing["model_wall"] - 1)
    cadence_err = 100 * (timing["cadence_ms"] / timing["model_cadence_ms"] - 1)
    pinned = f"server on CPU {server_cpu}, client on CPU {client_cpu}" if server_cpu is not None else "unpinned"
    print(f"Simulator capacity ({pinned})\n")
    print(f"| {'measure':52s} | {'measured':>12s} | {'model/goal':>12s} | {'result':>8s} |")
    print(f"|{'-' * 54}|{'-' * 14}|{'-' * 14}|{'-' * 10}|")
    ok = rate >= 50_000
    print(f"| {f'instant: SSE chunks/s ({args.streams} streams, {events:,} events)':52s} "
          f"| {rate:12,.0f} | {'>= 50,000':>12s} | {'ok' if ok else 'FAIL':>8s} |")  # fmt: skip
    print(f"| {'instant: SSE chunks per server CPU second':52s} "
          f"| {per_cpu:12,.0f} | {'>= 50,000':>12s} | {'ok' if per_cpu >= 50_000 else 'FAIL':>8s} |")  # fmt: skip
    ok_wall = abs(wall_err) <= 2
    print(f"| {f'kimi C=128 wall until all finish (scale {args.scale})':52s} "
          f"| {timing['wall']:11.3f}s | {timing['model_wall']:11.3f}s | {wall_err:+7.2f}% |")  # fmt: skip
    print(f"| {'kimi C=128 token cadence of one stream':52s} "
          f"| {timing['cadence_ms']:10.3f}ms | {timing['model_cadence_ms']:10.3f}ms | {cadence_err:+7.2f}% |")  # fmt: skip
    print(f"| {'kimi C=128 throughput (normalised tok/s)':52s} "
          f"| {timing['throughput']:12,.1f} | {timing['model_throughput']:12,.1f} | "
          f"{'ok' if ok_wall else 'FAIL':>8s} |")  # fmt: skip
    if args.calibration:
        calibration_table()
    return 0 if ok and ok_wall else 1


if __name__ == "__main__":
    sys.exit(main())
