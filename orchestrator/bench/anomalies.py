"""Anomaly flags: the things in a sweep a reader must not miss (pure).

- throughput_drop: output throughput fell although the load rose (C=2 below C=1 in the
  run that motivated orch);
- spread: repeats of one level disagree by more than 10% (max - min over mean);
- errors: some requests failed;
- client_saturated: the benchmark process used more than 90% of a core, so its own
  scheduling may have inflated the latencies it reports;
- server_disagrees: the server's token counter and the client's count differ by more than
  10% (wrong endpoint, a shared server, or missing usage);
- partial: the level was cut short (Ctrl-C, server gone);
- serialized: the client held C >= 2 requests in flight, but the server never generated two
  at once (no two requests' first-to-last token spans overlap; the server's own
  running-requests gauge, where it exports one, must agree): a server with one slot queues
  the rest, and the wait shows up as TTFT;
- no_scaling: at twice the load or more, throughput is within 10% of the lowest level's:
  more concurrency buys nothing on this server;
- capped: the level never ran the concurrency asked for: requests waited on the server while
  its running-requests gauge (vllm:num_requests_running, llama.cpp's requests_processing)
  stayed below C (3 scrapes or more), or the client never held C in flight: `--max-num-seqs`,
  the KV cache or a slow client held it down, and the level measured that lower load
  (`effective_concurrency` says how);
- latency_unreliable: the client's event loop lost a fifth of the level's wall time or more
  to wake-ups 50 ms late or more (lateness.py): it read token arrivals late, so the level's
  TTFT/ITL/TPOT figures measure the client as much as the server;
- itl_batched: the median ITL is 0 while requests brought several tokens each: chunks were
  read together, so the per-token gaps (ITL percentiles) say nothing;
- gpu_throttled: a GPU's SM clock fell while it sat at its power limit or ran hot (the
  level's `gpu_telemetry` block says which and how: gpu_figures.py holds the rule).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from orchestrator.bench.lateness import client_was_late, itl_batched
from orchestrator.runs.run_records import LevelResult

DROP_TOLERANCE = 0.01
SPREAD_LIMIT = 0.10
CPU_LIMIT = 0.90
SERVER_MISMATCH = 0.10
NO_GAIN = 0.10


def level_flags(result: LevelResult) -> list[str]:
    """Flags that one level's result carries on its own."""
    flags: list[str] = []
    if result.failed:
        flags.append("errors")
    if (result.spread or 0.0) > SPREAD_LIMIT:
        flags.append("spread")
    if (result.client_cpu_utilization or 0.0) > CPU_LIMIT:
        flags.append("client_saturated")
    if client_was_late(result):
        flags.append("latency_unreliable")
    if itl_batched(result):
        flags.append("itl_batched")
    if _server_disagrees(result):
        flags.append("server_disagrees")
    if result.partial:
        flags.append("partial")
    if _serialized(result):
        flags.append("serialized")
    elif capped(result) is not None:
        flags.append("capped")
    if (result.extra("gpu_telemetry") or {}).get("throttled"):
        flags.append("gpu_throttled")
    return flags


MIN_SCRAPES = 3  # fewer: a 1 s scrape interval may have missed the peak


def effective_concurrency(result: LevelResult) -> dict[str, float | int | None] | None:
    """What a closed or batch level asked for against what ran: C, the most requests the
    client held in flight, and the server's running and waiting gauges at their peak (None:
    a rate level, or no gauge to read)."""
    server = result.server_metrics or {}
    if result.mode == "rate" or not result.max_concurrency or server.get("max_running") is None:
        return None
    return {"asked": result.max_concurrency,
            "client_in_flight": result.figure("max_concurrent_requests", model_time=False),
            "max_running": server.get("max_running"), "max_waiting": server.get("max_waiting"),
            "scrapes": server.get("scrapes")}


def capped(result: LevelResult) -> str | None:
    """The level's load fell short of its C: in words ("8 asked, at most 4 running, 4
    waiting"); None when it did not, or it cannot be told. The server capped it when requests
    waited while fewer than C ran (a gauge sampled 3 times or more: its peak, not a moment of
    a batch level's tail, where the last long answers run alone); the client did when it never
    held C in flight although the level had C requests or more."""
    seen = effective_concurrency(result)
    if seen is None or result.completed < 2:
        return None
    asked, running = int(seen["asked"] or 0), seen["max_running"] or 0.0
    waiting, held = seen["max_waiting"] or 0.0, seen["client_in_flight"]
    by_server = (seen["scrapes"] or 0) >= MIN_SCRAPES and waiting > 0 and running < asked
    by_client = held is not None and held < asked <= result.completed + result.failed
    if not (by_server or by_client):
        return None
    words = f"{asked} asked, at most {running:g} running"
    if waiting:
        words += f", {waiting:g} waiting"
    if by_client:
        words += f" (the client held at most {held:g})"
    return words


def _serialized(result: LevelResult) -> bool:
    held = result.max_concurrency or 0
    generating = result.max_generating
    running = (result.server_metrics or {}).get("max_running")
    return (result.mode != "rate" and held >= 2 and result.completed >= 2
            and generating is not None and generating <= 1 and (running is None or running <= 1))


def no_scaling(levels: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of levels at twice the lowest load or more whose throughput is within
    NO_GAIN of the lowest level's, given (load, output throughput) pairs."""
    if len(levels) < 2:
        return []
    base_load, base_rate = min(levels)
    if base_load <= 0 or base_rate <= 0:
        return []
    return [i for i, (load, rate) in enumerate(levels)
            if load >= 2 * base_load and rate <= base_rate * (1 + NO_GAIN)]


def _server_disagrees(result: LevelResult) -> bool:
    """Compare token counts (the scrape span is not the level's wall time, so rates drift by
    a few percent on a clean run); fall back to rates when repeats were merged."""
    server = result.server_metrics or {}
    server_tokens = server.get("delta_generation_tokens")
    client_tokens = result.total_output_tokens
    if "repeats" not in server and server_tokens is not None and client_tokens:
        return bool(abs(server_tokens - client_tokens) / client_tokens > SERVER_MISMATCH)
    server_rate = server.get("server_output_throughput")
    client_rate = result.output_throughput or 0.0
    return bool(server_rate and client_rate
                and abs(server_rate - client_rate) / client_rate > SERVER_MISMATCH)


def throughput_drops(levels: Sequence[tuple[float, float]]) -> list[int]:
    """Indices (in load order) of levels whose throughput fell below the previous level's,
    given (load, output throughput) pairs; loads are sorted before comparing."""
    order = sorted(range(len(levels)), key=lambda i: levels[i][0])
    drops: list[int] = []
    for previous, current in itertools.pairwise(order):
        load_a, rate_a = levels[previous]
        load_b, rate_b = levels[current]
        if load_b > load_a and rate_b < rate_a * (1 - DROP_TOLERANCE):
            drops.append(current)
    return drops


def flags_against(earlier: Sequence[tuple[float, float]], level: tuple[float, float]) -> list[str]:
    """The cross-level flags of a level, given as (load, output throughput), against the
    levels of its mode that ran before it: a sweep writes each level once, as it ends, so
    its flags are final then (throughput_drop against the nearest lower load, no_scaling
    against the lowest)."""
    loads = [*earlier, level]
    index = len(loads) - 1
    flags = []
    if index in throughput_drops(loads):
        flags.append("throughput_drop")
    if index in no_scaling(loads):
        flags.append("no_scaling")
    return flags
