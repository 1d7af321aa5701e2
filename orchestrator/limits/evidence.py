"""The figures a limiter verdict needs, from one level's result (pure): `gather(level, plan)`.

Every figure is None when the level does not have it (no /metrics, no GPU telemetry, an older
level file): a rule that needs it then makes no claim. Sources:

- client: `client_cpu_utilization` (the load generator's CPU seconds over its wall time,
  1.0 = one core busy), `client_loop_lag_ms` (how late its event loop woke: its median),
  `client_late` (the share of the level's wall time lost to wake-ups 50 ms late or more:
  bench/lateness.py) and `effective_concurrency` (C asked, the client's in-flight peak);
- the level before it (the next lower load of the same mode, when given): its median TTFT,
  against this level's, for the queueing signature of a scheduler cap;
- server, from `server_metrics`: the running and waiting gauges (max, mean), KV-cache usage
  (max, 0-1), the preemptions counter's delta, how many scrapes; through vLLM's router, the
  replica's that queued most (fleet_evidence.py: `busiest_server`), and the fleet's own
  figures per replica (`Evidence.fleet`);
- GPUs, from `gpu_telemetry` (nvidia-smi or DCGM): utilization, memory utilization, power
  against its limit and SM clock against its highest, each a mean over the GPUs; throttling;
- the level's own figures: prefill tok/s (one request's prompt tokens per second of its
  TTFT) and decode tok/s (one stream's tokens per second between tokens, 1000 / ITL ms), in
  the simulator's model time where the level has it.

The keys the host collection fills are named here once (PCIE_RX ... SERVER_CPU, below) and
read where present.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from orchestrator.bench.anomalies import capped, effective_concurrency
from orchestrator.bench.gpu_ranges import out_of_range
from orchestrator.bench.lateness import late_share
from orchestrator.engines.layout import EngineFlags
from orchestrator.limits.fleet_evidence import FleetEvidence, busiest_server, fleet_evidence
from orchestrator.limits.topology import LayoutLinks
from orchestrator.metrics import SERVER_CPU as METRIC_SERVER_CPU
from orchestrator.runs.run_records import LevelResult

# In a level's `gpu_telemetry` block (all GPUs, `mean_<key>` or `<key>`), per GPU:
PCIE_RX = "pcie_rx_mb_s"  # PCIe receive, MB/s (nvidia-smi dmon -s t / DCGM_FI_PROF_PCIE_RX_BYTES)
PCIE_TX = "pcie_tx_mb_s"  # PCIe transmit, MB/s
NVLINK = "nvlink_mb_s"  # NVLink, both directions, MB/s (DCGM_FI_PROF_NVLINK_RX/TX_BYTES)
SM_ACTIVE = "sm_active"  # fraction 0-1 of time an SM had a warp (DCGM_FI_PROF_SM_ACTIVE)
# A figure of the level itself (bench/server_cpu.py): the busiest server process's CPU seconds
# per wall second (1.0 = one core; from /proc/<pid>/stat over the level).
SERVER_CPU = METRIC_SERVER_CPU
HOST_KEYS = (PCIE_RX, PCIE_TX, NVLINK, SM_ACTIVE, SERVER_CPU)


@dataclass(frozen=True)
class PlanFacts:
    """What the plan and the host say beside the level (each optional)."""

    max_num_seqs: int | None = None  # the scheduler cap the plan sets (the engine's flag)
    max_num_batched_tokens: int | None = None  # its batch token budget
    links: LayoutLinks | None = None  # the plan's TP groups on the host's topology
    gpus: int | None = None
    flags: EngineFlags | None = None  # the engine's names for them (None: no plan)


@dataclass(frozen=True)
class Evidence:
    level: str
    mode: str  # closed, batch, rate
    load: float | None  # C asked (closed, batch) or the rate
    completed: int
    partial: bool
    simulated: bool  # the simulator's level: no server processes of the modelled server
    client_cpu: float | None
    client_loop_lag_ms: float | None  # median lateness of the client's event loop
    client_late_share: float | None  # 0-1 of the level's wall time lost to late wake-ups
    client_in_flight: float | None
    ttft_ms: float | None  # median TTFT of this level
    previous_ttft_ms: float | None  # and of the level before it (None: no such level)
    previous_load: float | None
    capped: str | None  # anomalies.capped's words
    max_running: float | None
    mean_running: float | None
    max_waiting: float | None
    mean_waiting: float | None
    scrapes: int | None
    kv_cache_max: float | None
    preemptions: float | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    flags: EngineFlags | None  # the engine's names of the two above (None: no plan)
    gpus: int | None
    gpu_util: float | None  # 0-1
    mem_util: float | None  # 0-1: time device memory was read or written
    power_fraction: float | None  # mean power / power limit
    clock_fraction: float | None  # mean SM clock / the GPU's highest in the level
    throttled: bool | None
    pcie_mb_s: float | None  # rx + tx, per GPU
    nvlink_mb_s: float | None
    sm_active: float | None
    server_cpu: float | None
    server_cpu_total: float | None  # all the server's processes, in cores
    host_cpu_busy: float | None  # the whole host's CPUs busy, 0-1 of every core
    host_cores: int | None
    links: LayoutLinks | None
    prefill_tok_s: float | None
    decode_tok_s: float | None
    fleet: FleetEvidence | None = None  # through vLLM's router: per replica (fleet_evidence.py)

    def present(self) -> dict[str, Any]:
        """The figures the level has, by name (no links, no words)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None
                and f.name not in ("links", "level", "mode", "capped", "simulated", "fleet")}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _ratio(part: float | None, whole: float | None) -> float | None:
    return round(part / whole, 4) if part is not None and whole else None


def _gpu_block(level: LevelResult) -> Mapping[str, Any]:
    block = level.extra("gpu_telemetry")
    return block if isinstance(block, Mapping) and block.get("samples") else {}


def _reading(value: Any, key: str) -> float | None:
    """A GPU figure of a level file, None when it is not one a GPU can read (gpu_ranges.py):
    a level file edited by hand, or written before readings were range-checked."""
    number = _number(value)
    return number if number is not None and out_of_range(key, number) is None else None


def _mean_over_gpus(gpus: Sequence[Mapping[str, Any]], part: str, whole: str) -> float | None:
    ratios = [r for g in gpus
              if (r := _ratio(_reading(g.get(part), _unit(part)), _reading(g.get(whole), _unit(whole)))) is not None]
    return round(sum(ratios) / len(ratios), 4) if ratios else None


def _unit(key: str) -> str:
    """A summary's key -> the reading it summarizes (`mean_power_w` -> `power_w`)."""
    return key.removeprefix("mean_").removeprefix("max_").removeprefix("min_")


def _host_key(block: Mapping[str, Any], key: str) -> float | None:
    value = _reading(block.get(f"mean_{key}"), key)
    return value if value is not None else _reading(block.get(key), key)


def _gpu_figures(level: LevelResult) -> dict[str, Any]:
    block = _gpu_block(level)
    gpus = [g for g in block.get("gpus") or [] if isinstance(g, Mapping)]
    util = _reading(block.get("mean_util_pct"), "util_pct")
    mems = [m for g in gpus if (m := _reading(g.get("mean_mem_util_pct"), "mem_util_pct")) is not None]
    mem = sum(mems) / len(mems) if mems else None
    rx, tx = _host_key(block, PCIE_RX), _host_key(block, PCIE_TX)
    return {
        "gpu_util": _ratio(util, 100.0),
        "mem_util": _ratio(mem, 100.0),
        "power_fraction": _mean_over_gpus(gpus, "mean_power_w", "power_limit_w"),
        "clock_fraction": _mean_over_gpus(gpus, "mean_sm_clock_mhz", "max_sm_clock_mhz"),
        "throttled": bool(block["throttled"]) if "throttled" in block else None,
        "pcie_mb_s": (rx or 0.0) + (tx or 0.0) if rx is not None or tx is not None else None,
        "nvlink_mb_s": _host_key(block, NVLINK),
        "sm_active": _host_key(block, SM_ACTIVE),
        "gpus_seen": _number(block.get("gpu_count")),
    }


def _split(level: LevelResult) -> tuple[float | None, float | None]:
    """(prefill tok/s, decode tok/s) of one request, from the level's mean figures."""
    prompt, ttft = level.figure("mean_input_tokens", model_time=False), level.figure("mean_ttft_ms")
    itl = level.figure("mean_itl_ms")
    prefill = round(prompt / (ttft / 1000), 1) if prompt and ttft else None
    decode = round(1000 / itl, 2) if itl else None
    return prefill, decode


def _client_cpu(level: LevelResult) -> float | None:
    cpu = level.figure("client_cpu_utilization", model_time=False)
    if cpu is None:
        seconds, wall = level.figure("client_cpu_s", model_time=False), level.duration
        cpu = _ratio(seconds, wall)
    return cpu


def _host_cpu(level: LevelResult) -> dict[str, Any]:
    """The server's processes together and the whole host, from the `server_processes` block."""
    block = level.extra("server_processes")
    block = block if isinstance(block, Mapping) else {}
    cores = block.get("cores")
    return {"server_cpu_total": _number(block.get("server_cpu_total")),
            "host_cpu_busy": _number(block.get("host_cpu_busy")),
            "host_cores": cores if isinstance(cores, int) and not isinstance(cores, bool) else None}


def _loop_lag(level: LevelResult) -> float | None:
    block = level.extra("client_loop_lag_ms")
    return _number(block.get("median")) if isinstance(block, Mapping) else None


def _load(level: LevelResult) -> float | None:
    return _number(level.max_concurrency if level.mode != "rate" else level.request_rate)


def _before(level: LevelResult, before: LevelResult | None) -> dict[str, Any]:
    """The level before's median TTFT and load, when it is one of the same mode at a lower load."""
    load, earlier = _load(level), _load(before) if before is not None else None
    if before is None or before.mode != level.mode or load is None or earlier is None or earlier >= load:
        return {"previous_ttft_ms": None, "previous_load": None}
    return {"previous_ttft_ms": before.figure("median_ttft_ms"), "previous_load": earlier}


def previous(level: LevelResult, levels: Sequence[LevelResult]) -> LevelResult | None:
    """The level of `levels` just below `level` (same mode, the highest lower load)."""
    load = _load(level)
    lower = [(lv_load, i) for i, lv in enumerate(levels) if lv.mode == level.mode
             and (lv_load := _load(lv)) is not None and load is not None and lv_load < load]
    return levels[max(lower)[1]] if lower else None


def gather(level: LevelResult, plan: PlanFacts | None = None,
           before: LevelResult | None = None) -> Evidence:
    """The evidence of one level (and what the plan and host say, and the level `before`
    it, when given)."""
    plan = plan or PlanFacts()
    server = level.server_metrics or busiest_server(level) or {}
    seen = effective_concurrency(level) or {}
    gpu = _gpu_figures(level)
    prefill, decode = _split(level)
    seen_gpus = gpu.pop("gpus_seen")
    return Evidence(
        level=level.level, mode=level.mode, load=_load(level), completed=level.completed, partial=level.partial,
        simulated=level.simulated,
        client_cpu=_client_cpu(level), client_loop_lag_ms=_loop_lag(level),
        client_late_share=late_share(level.extra("client_late")),
        ttft_ms=level.figure("median_ttft_ms"), **_before(level, before),
        client_in_flight=_number(seen.get("client_in_flight")
                                 if seen else level.figure("max_concurrent_requests", model_time=False)),
        capped=capped(level),
        max_running=_number(server.get("max_running")), mean_running=_number(server.get("mean_running")),
        max_waiting=_number(server.get("max_waiting")), mean_waiting=_number(server.get("mean_waiting")),
        scrapes=int(server["scrapes"]) if isinstance(server.get("scrapes"), int) else None,
        kv_cache_max=_number(server.get("max_kv_cache_usage")),
        preemptions=_number(server.get("delta_preemptions")),
        max_num_seqs=plan.max_num_seqs, max_num_batched_tokens=plan.max_num_batched_tokens,
        flags=plan.flags,
        gpus=plan.gpus if plan.gpus is not None else (int(seen_gpus) if seen_gpus else None),
        server_cpu=level.figure(SERVER_CPU, model_time=False), **_host_cpu(level), links=plan.links,
        prefill_tok_s=prefill, decode_tok_s=decode, **gpu, fleet=fleet_evidence(level),
    )
