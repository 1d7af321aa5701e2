"""One client process or two: the same figures when the server sets the pace.

`bench.client_processes` splits a level's load across client processes and computes its
figures over all their requests together. Against a server that is not the bottleneck of
the client, both must measure the same server. This script starts the simulator (`orch sim
serve`, the Kimi profile at a time scale where its model's step time sets the pace, far
below its streaming capacity: benchmarks/sim_capacity.py), runs one closed level at a high
concurrency with 1 and with 2 client processes (alternating, `--rounds` times each; each
figure is the median of its rounds) and prints:

1. the merged figures of each (requests, throughput, TTFT, ITL, E2E, the busiest client
   process's share of its core) and their ratio 2 ÷ 1, `ok` within TOLERANCE;
2. each client process's own figures in the 2-process runs (its share of C, requests,
   throughput, CPU, loop lateness): together they add up to the merged level.

Usage: .venv/bin/python benchmarks/client_processes.py [--concurrency 256] [--requests 1024]
       [--max-tokens 128] [--scale 0.2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.bench.sweep import run_sweep
from orchestrator.plan.models import Bench
from orchestrator.sim.testing import running_simulator

KIMI = "kimi-k2.5-nvfp4-8x-rtx-pro-6000"
# 2 ÷ 1 within this: the level's counts exactly, its rates and latencies within 5% (two
# runs of one process differ by about that much on a shared 2-core machine)
TOLERANCE = 0.05
FIGURES = [  # (level key, heading, format)
    ("completed", "requests", "{:,.0f}"),
    ("total_output_tokens", "tokens", "{:,.0f}"),
    ("output_throughput", "tok/s", "{:,.0f}"),
    ("request_throughput", "req/s", "{:,.1f}"),
    ("median_ttft_ms", "TTFT p50 ms", "{:.1f}"),
    ("p99_ttft_ms", "TTFT p99 ms", "{:.1f}"),
    ("median_itl_ms", "ITL p50 ms", "{:.2f}"),
    ("mean_e2el_ms", "E2E mean ms", "{:.1f}"),
    ("client_cpu_utilization", "client CPU", "{:.2f}"),
]
EXACT = {"completed", "total_output_tokens"}
NOT_COMPARED = {"client_cpu_utilization"}  # the point of a second process: it differs


def level(url: str, processes: int, args: argparse.Namespace) -> dict[str, Any]:
    config = Bench.model_validate({
        "concurrency": [args.concurrency], "requests_per_level": args.requests,
        "max_tokens": args.max_tokens, "ignore_eos": True, "client_processes": processes,
        "warmup": args.concurrency, "metrics_interval": None, "gpu_telemetry": None})
    with tempfile.TemporaryDirectory() as out:
        result = run_sweep(config, base_url=url, model=None, api_key=None, out_dir=Path(out))
    if result.stopped:
        raise SystemExit(f"the level stopped early: {result.stopped} {result.stop_detail or ''}")
    return result.levels[0].result.model_dump(mode="json")


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(float(run[key] or 0.0) for run in runs))


def merged_table(by_count: dict[int, list[dict[str, Any]]]) -> bool:
    heads = [head for _, head, _ in FIGURES]
    print("| processes | " + " | ".join(f"{h:>12s}" for h in heads) + " |")
    print("|" + "-" * 11 + "|" + "|".join("-" * 14 for _ in heads) + "|")
    for count, runs in by_count.items():
        cells = [fmt.format(median_of(runs, key)) for key, _, fmt in FIGURES]
        print(f"| {count:>9d} | " + " | ".join(f"{c:>12s}" for c in cells) + " |")
    ok = True
    ratios = []
    for key, _, _ in FIGURES:
        one, two = median_of(by_count[1], key), median_of(by_count[2], key)
        ratio = two / one if one else float("nan")
        good = key in NOT_COMPARED or (ratio == 1.0 if key in EXACT else abs(ratio - 1) <= TOLERANCE)
        ok = ok and good
        ratios.append(f"{ratio:.3f}" + ("" if key in NOT_COMPARED else " ok" if good else " FAIL"))
    print(f"| {'2 ÷ 1':>9s} | " + " | ".join(f"{r:>12s}" for r in ratios) + " |")
    return ok


def processes_table(runs: list[dict[str, Any]]) -> None:
    print("| round | process | C | requests | tok/s | req/s | CPU | loop lag p50 ms | late share |")
    print("|------:|--------:|--:|---------:|------:|------:|----:|----------------:|-----------:|")
    for number, run in enumerate(runs, 1):
        each = run["client_processes"]["processes"]
        for p in each:
            lag = (p["loop_lag_ms"] or {}).get("median", 0.0)
            late = (p["late"] or {}).get("share", 0.0)
            print(f"| {number} | {p['process']} | {p['concurrency']} | {p['completed']:,} | "
                  f"{p['output_throughput']:,.0f} | {p['request_throughput']:,.1f} | "
                  f"{p['cpu_utilization']:.2f} | {lag:.2f} | {late:.3f} |")
        print(f"| {number} | sum | {sum(p['concurrency'] for p in each)} | "
              f"{sum(p['completed'] for p in each):,} | "
              f"{sum(p['output_throughput'] for p in each):,.0f} | "
              f"{sum(p['request_throughput'] for p in each):,.1f} | | | |")
        print(f"| {number} | merged | {run['max_concurrency']} | {run['completed']:,} | "
              f"{run['output_throughput']:,.0f} | {run['request_throughput']:,.1f} | | | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--scale", type=float, default=0.2, help="the simulator's time scale")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    by_count: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    with running_simulator(profile=KIMI, time_scale=args.scale, startup_time_scale=0.001,
                           disable_log_stats=True) as sim:
        for _ in range(args.rounds):
            for count in (1, 2):
                by_count[count].append(level(sim.base_url, count, args))
    print(f"Closed level C={args.concurrency}, {args.requests} requests of {args.max_tokens} "
          f"tokens, simulator {KIMI} at time scale {args.scale}; median of {args.rounds} "
          f"rounds; wall-clock figures\n")
    ok = merged_table(by_count)
    print(f"\nEach client process of the 2-process runs (tolerance of the ratios: counts exact, "
          f"the rest ±{TOLERANCE:.0%})\n")
    processes_table(by_count[2])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
