"""The limiter of a level, from its evidence (pure): `limiter(evidence) -> Verdict`, and where a
sweep stops rising and why: `knee(levels)`.

The rules run in this order; the first that decides names the limiter:

1. not-enough-evidence   fewer than 2 requests completed, or the level was cut short;
2. client-bound          the client was very late: its event loop lost LATE_SHARE (20%) of the
                         level's wall time to wake-ups LATE_MS (50 ms) late or more (a level
                         file without that share: 50 ms late at the median; bench/lateness.py),
                         whatever the server's gauges caught (a paused or starved client's
                         figures are its own); or the load generator used CPU_BUSY (90%) of a
                         core or more, its event loop woke LOOP_LAG_MS (10 ms) late or more at
                         the median while the server's gauges never held C requests at once,
                         or it never held C in flight although the level had C requests: the
                         server was not asked for C, so nothing after this rule may blame it;
   router-bound,         through vLLM's router (a level with a `router` block): the router's
   slow-replica,         own CPU or the latency it added; one replica far slower per request
   unbalanced            than the others; the policy leaving one queueing while another idled
                         (fleet_rules.py says how each decides);
3. scheduler-cap         requests waited while the running gauge sat at the engine's scheduler
                         cap (95%; vLLM's --max-num-seqs, SGLang's --max-running-requests);
                         without the plan's value, waiting while fewer than C ran and the KV
                         cache had room (medium: the cap or the batch token budget);
4. kv-cache-bound        KV-cache usage at KV_FULL (95%) with requests waiting or preempted
                         (high), or either sign alone (medium);
5. scheduler-cap         the plan's own cap below C, more requests in flight than the cap and
                         the median TTFT QUEUE_JUMP (2) times the level before's: requests
                         queued for a slot (medium, however sparse the gauges; not when
                         DENSE_SCRAPES (10) scrapes or more never saw a request wait);
6. host-cpu-bound        the busiest server process at CPU_BUSY of a core, or the whole host's
                         CPUs CPU_BUSY busy with the server's processes on half its cores or
                         more (medium), while the GPUs sat below GPU_IDLE (50%) busy, or the
                         host has no GPU telemetry at all (vLLM on a CPU: the server's own CPU
                         is its compute);
7. interconnect-bound    GPUs busy (GPU_BUSY, 80%) with SM activity below SM_LOW (50%) while
                         PCIe/NVLink carried LINK_BUSY_MB_S or more per GPU (high when a TP
                         group also leaves NVLink); without those counters, a TP group off
                         NVLink, GPUs busy and power below POWER_LOW (70%) of the limit (medium);
8. compute-bound         GPUs busy (GPU_SATURATED, 90%) at their power limit (POWER_HIGH, 90%)
                         or throttled, or SM activity at SM_HIGH (80%);
9. memory-bandwidth-bound GPUs busy, device memory busy (MEM_BUSY, 60%) and power below the
                         limit (medium: nvidia-smi's memory utilization is coarse);
10. not-enough-evidence  none of the above decided: the figures the level had are given, no
                         guess is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.bench.anomalies import CPU_LIMIT, MIN_SCRAPES
from orchestrator.bench.auto import knee_of_sweep
from orchestrator.bench.lateness import LATE_MS, very_late
from orchestrator.limits.evidence import Evidence, PlanFacts, gather, previous
from orchestrator.limits.fleet_rules import FLEET_LIMITERS, router_bound, slow_replica, unbalanced
from orchestrator.limits.verdict import Verdict as Verdict  # its home is verdict.py
from orchestrator.plan.models import AutoSweep
from orchestrator.runs.run_records import LevelResult

LIMITERS = ("client-bound", *FLEET_LIMITERS, "scheduler-cap", "kv-cache-bound", "host-cpu-bound", "interconnect-bound",
            "compute-bound", "memory-bandwidth-bound", "not-enough-evidence")

CPU_BUSY = CPU_LIMIT  # 0.90 of one core: the client's `client_saturated` flag uses the same
LOOP_LAG_MS = 10.0  # half the client's 20 ms timer tick: late most of the time
AT_CAP = 0.95
QUEUE_JUMP = 2.0  # the median TTFT at least doubled from the level before: requests queued
DENSE_SCRAPES = 10  # as many as bench/server_metrics.py's schedule takes of a level
KV_FULL = 0.95
GPU_IDLE = 0.50
GPU_BUSY = 0.80
GPU_SATURATED = 0.90
SM_LOW = 0.50
SM_HIGH = 0.80
LINK_BUSY_MB_S = 5000.0  # per GPU: a fifth of PCIe 4.0 x16, far above what a decode step needs
POWER_LOW = 0.70
POWER_HIGH = 0.90
MEM_BUSY = 0.60
KNEE_THRESHOLD = AutoSweep().threshold  # the same 5% as `concurrency: auto`


def _f(value: float) -> str:
    return f"{value:.0%}" if value <= 1.5 else f"{value:,.0f}"


def _not_finished(e: Evidence) -> Verdict | None:
    if e.completed >= 2 and not e.partial:
        return None
    return Verdict("not-enough-evidence", "high", "the level completed fewer than 2 requests or was cut short",
                   {"completed": e.completed, "partial": e.partial})


def _client(e: Evidence) -> Verdict | None:
    busy = e.client_cpu is not None and e.client_cpu >= CPU_BUSY
    # very late decides whatever the server's gauges caught: a scrape that saw C at once
    # does not make a paused or starved client's figures the server's
    very = very_late(e.client_late_share, e.client_loop_lag_ms)
    # a little late read and sent late, but if the server held all C at once it was given them
    late = very or (e.client_loop_lag_ms is not None and e.client_loop_lag_ms >= LOOP_LAG_MS
                    and not _server_held(e))
    short = (e.client_in_flight is not None and e.load is not None and e.client_in_flight < e.load
             <= e.completed and e.capped is not None)
    if not (busy or late or short):
        return None
    figures: dict[str, float | str | bool] = {}
    said = []
    if e.client_cpu is not None:
        figures["client_cpu"] = e.client_cpu
    if busy:
        said.append(f"orch's load generator used {_f(e.client_cpu or 0.0)} of a core")
    if late and e.client_loop_lag_ms is not None:
        figures["client_loop_lag_ms"] = e.client_loop_lag_ms
        said.append(f"its event loop woke {e.client_loop_lag_ms:.0f} ms late at the median")
    if very and e.client_late_share is not None:
        figures["client_late_share"] = e.client_late_share
        said.append(f"it lost {_f(e.client_late_share)} of the level's time to wake-ups "
                    f"{LATE_MS:.0f} ms late or more")
    if short and e.client_in_flight is not None and e.load is not None:
        figures |= {"client_in_flight": e.client_in_flight, "asked": e.load}
        said.append(f"it held {e.client_in_flight:g} of {e.load:g} requests in flight at most")
    signs = busy + late + short
    return Verdict("client-bound", "high" if signs >= 2 or late else "medium",
                   "; ".join(said) + ": the server was not given the load asked"
                   + ("; the level's latencies measure the client" if very else ""), figures)


def _server_held(e: Evidence) -> bool:
    """The server's gauges saw every request of the level's load at once (running or waiting)."""
    if e.max_running is None or e.load is None or (e.scrapes or 0) < MIN_SCRAPES:
        return False
    return e.max_running + (e.max_waiting or 0.0) >= e.load


def _waiting(e: Evidence) -> bool:
    return (e.max_waiting or 0.0) > 0 and (e.scrapes or 0) >= MIN_SCRAPES


def _cap(e: Evidence) -> str:
    """The engine's scheduler cap as its flag, or in words when it has none (or no plan)."""
    name = e.flags.scheduler_cap if e.flags else None
    return f"--{name}" if name else "the scheduler's cap on running requests"


def _cap_key(e: Evidence) -> str:
    """The cap's figure by the engine's own flag name (`max-running-requests` for SGLang);
    `max_num_seqs` when the engine is not known."""
    return (e.flags.scheduler_cap if e.flags else None) or "max_num_seqs"


def _budget(e: Evidence) -> str:
    name = e.flags.batch_tokens if e.flags else None
    return f"--{name}" if name else "its token budget per step"


def _scheduler(e: Evidence) -> Verdict | None:
    if not _waiting(e) or e.max_running is None:
        return None
    if e.max_num_seqs:
        if e.max_running < AT_CAP * e.max_num_seqs:
            return None
        return Verdict("scheduler-cap", "high",
                       f"requests waited while {e.max_running:g} ran, {_cap(e)} {e.max_num_seqs}",
                       {"max_running": e.max_running, "max_waiting": e.max_waiting or 0.0,
                        _cap_key(e): e.max_num_seqs})
    room = e.kv_cache_max is not None and e.kv_cache_max < KV_FULL
    if e.load is None or e.max_running >= e.load or not room or (e.preemptions or 0) > 0:
        return None
    return Verdict("scheduler-cap", "medium",
                   f"requests waited while {e.max_running:g} of {e.load:g} ran and the KV cache had room "
                   f"({_cap(e)} or {_budget(e)})",
                   {"max_running": e.max_running, "max_waiting": e.max_waiting or 0.0,
                    "kv_cache_max": e.kv_cache_max or 0.0, "asked": e.load})


def _queued(e: Evidence) -> Verdict | None:
    """The plan's own cap below C, and the client's queueing signature: more requests in
    flight than the cap while the median TTFT jumped QUEUE_JUMP-fold from the level before.
    Gauges sampled often enough that never saw a request wait say otherwise."""
    cap, load = e.max_num_seqs, e.load
    if e.mode == "rate" or not cap or load is None or cap >= load or e.ttft_ms is None or not e.previous_ttft_ms:
        return None
    if e.client_in_flight is not None and e.client_in_flight <= cap:
        return None
    if e.ttft_ms < QUEUE_JUMP * e.previous_ttft_ms:
        return None
    if (e.scrapes or 0) >= DENSE_SCRAPES and e.max_waiting == 0:
        return None
    figures: dict[str, float | str | bool] = {
        _cap_key(e): cap, "asked": load, "ttft_ms": e.ttft_ms,
        "previous_ttft_ms": e.previous_ttft_ms, "previous_load": e.previous_load or 0.0}
    if e.client_in_flight is not None:
        figures["client_in_flight"] = e.client_in_flight
    held = f"{e.client_in_flight:g}" if e.client_in_flight is not None else f"{load:g}"
    return Verdict("scheduler-cap", "medium",
                   f"{held} requests in flight over {_cap(e)} {cap}, and the median TTFT rose from "
                   f"{e.previous_ttft_ms:,.0f} ms at {e.previous_load or 0.0:g} to {e.ttft_ms:,.0f} ms: "
                   "requests queued for a running slot", figures)


def _kv(e: Evidence) -> Verdict | None:
    full = e.kv_cache_max is not None and e.kv_cache_max >= KV_FULL
    preempted = (e.preemptions or 0) > 0
    if not (full or preempted):
        return None
    figures: dict[str, float | str | bool] = {}
    if e.kv_cache_max is not None:
        figures["kv_cache_max"] = e.kv_cache_max
    if e.preemptions is not None:
        figures["preemptions"] = e.preemptions
    if e.max_waiting is not None:
        figures["max_waiting"] = e.max_waiting
    sure = full and (preempted or _waiting(e))
    said = [f"the KV cache reached {_f(e.kv_cache_max or 0.0)}"] if full else []
    said += [f"{e.preemptions:g} requests were preempted for want of KV blocks"] if preempted else []
    why = " and ".join(said)
    return Verdict("kv-cache-bound", "high" if sure else "medium", why, figures)


def _host_full(e: Evidence) -> bool:
    """The whole host's CPUs were busy and the server's processes held a fair share of them
    (half the cores or more): the server waited for CPU that other programs took."""
    return (e.host_cpu_busy is not None and e.host_cpu_busy >= CPU_BUSY and e.host_cores is not None
            and e.server_cpu_total is not None and e.server_cpu_total >= e.host_cores / 2)


def _host_cpu(e: Evidence) -> Verdict | None:
    core = e.server_cpu is not None and e.server_cpu >= CPU_BUSY
    full = _host_full(e)
    idle = e.gpu_util is not None and e.gpu_util < GPU_IDLE
    no_gpu = e.gpu_util is None and e.gpus in (None, 0)
    if not (core or full) or not (idle or no_gpu):
        return None
    figures: dict[str, float | str | bool] = {"server_cpu": e.server_cpu or 0.0}
    if e.gpu_util is not None:
        figures["gpu_util"] = e.gpu_util
    where = f"while the GPUs were {_f(e.gpu_util or 0.0)} busy" if idle else "with no GPU to hand work to"
    if core:
        return Verdict("host-cpu-bound", "high" if idle or e.gpus == 0 else "medium",
                       f"the busiest server process used {_f(e.server_cpu or 0.0)} of a core {where}", figures)
    figures |= {"server_cpu_total": e.server_cpu_total or 0.0, "host_cpu_busy": e.host_cpu_busy or 0.0,
                "host_cores": e.host_cores or 0}
    return Verdict("host-cpu-bound", "medium",
                   f"the host's CPUs were {_f(e.host_cpu_busy or 0.0)} busy, the server's processes using "
                   f"{e.server_cpu_total or 0.0:.1f} of its {e.host_cores} cores {where}: it waited for CPU "
                   "other programs took too", figures)


def _interconnect(e: Evidence) -> Verdict | None:
    busy = e.gpu_util is not None and e.gpu_util >= GPU_BUSY
    if not busy or (e.links is not None and e.links.tensor < 2):
        return None
    traffic = max(e.pcie_mb_s or 0.0, e.nvlink_mb_s or 0.0)
    off_nvlink = e.links is not None and e.links.over_pcie
    figures: dict[str, float | str | bool] = {"gpu_util": e.gpu_util or 0.0}
    if e.links is not None:
        figures["tp_links"] = e.links.describe()
    if e.sm_active is not None and e.sm_active < SM_LOW and traffic >= LINK_BUSY_MB_S:
        figures |= {"sm_active": e.sm_active, "link_mb_s": traffic}
        return Verdict("interconnect-bound", "high" if off_nvlink else "medium",
                       f"GPUs {_f(e.gpu_util or 0.0)} busy with SMs active {_f(e.sm_active)} while links "
                       f"carried {traffic:,.0f} MB/s per GPU", figures)
    measured = e.sm_active is not None or e.pcie_mb_s is not None or e.nvlink_mb_s is not None
    if measured or not off_nvlink or e.power_fraction is None or e.power_fraction >= POWER_LOW:
        return None
    figures["power_fraction"] = e.power_fraction
    return Verdict("interconnect-bound", "medium",
                   f"{figures['tp_links']}: GPUs {_f(e.gpu_util or 0.0)} busy at {_f(e.power_fraction)} of "
                   "their power limit (waiting on the all-reduce, not computing)", figures)


def _compute(e: Evidence) -> Verdict | None:
    if e.sm_active is not None and e.sm_active >= SM_HIGH:
        return Verdict("compute-bound", "high", f"SMs active {_f(e.sm_active)} of the time",
                       {"sm_active": e.sm_active})
    if e.gpu_util is None or e.gpu_util < GPU_SATURATED:
        return None
    at_limit = e.power_fraction is not None and e.power_fraction >= POWER_HIGH
    if not (at_limit or e.throttled):
        return None
    figures: dict[str, float | str | bool] = {"gpu_util": e.gpu_util, "throttled": bool(e.throttled)}
    if e.power_fraction is not None:
        figures["power_fraction"] = e.power_fraction
    if e.clock_fraction is not None:
        figures["clock_fraction"] = e.clock_fraction
    return Verdict("compute-bound", "high" if at_limit else "medium",
                   f"GPUs {_f(e.gpu_util)} busy at {_f(e.power_fraction or 0.0)} of their power limit"
                   + (", clocks throttled" if e.throttled else ""), figures)


def _memory(e: Evidence) -> Verdict | None:
    if e.gpu_util is None or e.gpu_util < GPU_SATURATED or e.mem_util is None or e.mem_util < MEM_BUSY:
        return None
    if e.power_fraction is not None and e.power_fraction >= POWER_HIGH:
        return None
    figures: dict[str, float | str | bool] = {"gpu_util": e.gpu_util, "mem_util": e.mem_util}
    if e.power_fraction is not None:
        figures["power_fraction"] = e.power_fraction
    return Verdict("memory-bandwidth-bound", "medium",
                   f"GPUs {_f(e.gpu_util)} busy, device memory busy {_f(e.mem_util)} of the time, below "
                   "the power limit", figures)


RULES: tuple[Callable[[Evidence], Verdict | None], ...] = (
    _not_finished, _client, router_bound, slow_replica, unbalanced, _scheduler, _kv, _queued, _host_cpu, _interconnect, _compute, _memory)


def limiter(evidence: Evidence) -> Verdict:
    """The first rule that decides (module doc); not-enough-evidence when none does."""
    for rule in RULES:
        verdict = rule(evidence)
        if verdict is not None:
            return verdict
    missing = _missing(evidence)
    why = "no figure of the level decides what held it" + (f" (none of: {', '.join(missing)})" if missing else "")
    return Verdict("not-enough-evidence", "low", why,
                   {k: v for k, v in evidence.present().items() if isinstance(v, float | int | str | bool)})


def _missing(e: Evidence) -> list[str]:
    """The kinds of evidence the level lacks, in the words of the plan and the host."""
    out = []
    if e.scrapes is None and not (e.fleet and any(r.scrapes for r in e.fleet.replicas)):
        out.append("the server's /metrics (bench.metrics_interval)")
    if e.gpu_util is None:
        out.append("GPU telemetry (nvidia-smi or a DCGM exporter on the host)")
    elif e.sm_active is None and e.pcie_mb_s is None:
        out.append("SM activity and PCIe traffic (DCGM's profiling fields)")
    if e.server_cpu is None and not e.simulated:  # the simulator's CPU is not the modelled server's
        out.append("the server's CPU time")
    return out


@dataclass(frozen=True)
class Knee:
    at: int | None  # the knee's concurrency; None while the curve still rises
    how: str
    verdict: Verdict | None  # the limiter at the knee (or at the highest level while rising)
    after: list[tuple[int, Verdict]]  # each level from the knee on (or the highest alone)

    def describe(self) -> str:
        """`interconnect-bound from C=64` / `still rising, compute-bound at C=256`."""
        if not self.after:
            return self.how
        if self.at is None:
            load, verdict = self.after[-1]
            rising = "one level" if self.how == "one level" else "still rising"
            return f"{rising}, {_named(verdict)} at C={load}"
        return f"{_named(self.verdict)} from C={self.at}"


def _named(verdict: Verdict | None) -> str:
    """A verdict's name as a sentence part: no verdict is said as such, not as a cause."""
    if verdict is None or verdict.name == "not-enough-evidence":
        return "cause not measured"
    return verdict.name


def knee(levels: Sequence[LevelResult], plan: PlanFacts | None = None,
         threshold: float = KNEE_THRESHOLD, *, known: tuple[int | None, str] | None = None,
         judge: Callable[[LevelResult], Verdict] | None = None) -> Knee:
    """Where output throughput stops rising among the closed and batch levels (the report's
    definition, bench/auto.py's `knee_of_sweep`; `known`: the knee and how, as a caller found
    it already), and the limiter at and after it (`judge`: how a level is judged; default its
    evidence with `plan`)."""
    usable = {int(lv.max_concurrency): lv for lv in levels
              if lv.mode != "rate" and lv.max_concurrency and not lv.partial and lv.output_throughput}
    judged = judge or (lambda lv: limiter(gather(lv, plan, previous(lv, levels))))
    if len(usable) == 1:  # no knee to find, but the level still says what held it
        (c, only), = usable.items()
        return Knee(None, "one level", judged(only), [(c, judged(only))])
    if not usable:
        return Knee(None, "too few levels", None, [])
    loads = sorted(usable)
    if known is not None and (known[0] is None or known[0] in usable):
        at, how = known
    else:
        curve = {c: lv.figure("output_throughput") or 0.0 for c, lv in usable.items()}
        at = knee_of_sweep(curve, threshold)
        how = f"doubling gains < {threshold:.0%}" if at is not None else f"still rising at C={loads[-1]}"
    shown = [c for c in loads if c >= at] if at is not None else loads[-1:]
    after = [(c, judged(usable[c])) for c in shown]
    return Knee(at, how, after[0][1] if after else None, after)
