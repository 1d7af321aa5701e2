"""The limiter's rules of a level benchmarked through vLLM's router (pure), each on the level's
`Evidence.fleet` (fleet_evidence.py) and silent without it. rules.py runs them right after
client-bound (a level the client held down is never blamed on the fleet), in this order:

router-bound  the router's own process used ROUTER_CPU_BUSY (90%) of a core or more (high),
              or the client waited ROUTER_ADDED_SHARE (25%) of its mean end-to-end latency,
              and at least ROUTER_ADDED_MS (20 ms), beyond the replicas' own mean (medium):
              requests queued in the router, not in the replicas;
slow-replica  one replica's own mean latency per request SLOW (2) times the median of the
              others', or its tokens per second of request time half theirs, while the
              router gave it no more than its fair share (FAIR_SLACK, 1.25 x 1/N): the replica
              is slow, not loaded (high when both figures say so);
unbalanced    the policy left one replica queueing (requests waiting in its own scheduler
              while it ran BUSY_RUNNING (1) or more on average) while another idled (its mean running gauge at most IDLE (25%) of the busy one's,
              nothing waiting), each with MIN_SCRAPES scrapes of its /metrics: the router
              sent work where it waited while a replica had room (the advice: a load-aware
              policy, `router.policy: power_of_two`).
"""

from __future__ import annotations

from statistics import median

from orchestrator.bench.anomalies import CPU_LIMIT, MIN_SCRAPES
from orchestrator.limits.evidence import Evidence
from orchestrator.limits.fleet_evidence import FleetEvidence, ReplicaFigures
from orchestrator.limits.verdict import Verdict

FLEET_LIMITERS = ("router-bound", "slow-replica", "unbalanced")
ROUTER_CPU_BUSY = CPU_LIMIT
ROUTER_ADDED_SHARE = 0.25
ROUTER_ADDED_MS = 20.0
SLOW = 2.0
FAIR_SLACK = 1.25
IDLE = 0.25
BUSY_RUNNING = 1.0  # a queueing replica ran at least one request on average
MIN_REQUESTS = 2  # a replica judged on fewer requests than this is not judged


def _port(url: str) -> str:
    """A replica as the words name it: its host:port."""
    return url.split("://", 1)[-1].rstrip("/")


def _policy(fleet: FleetEvidence) -> str:
    return f"policy {fleet.policy}" if fleet.policy else "the router's policy"


def router_bound(e: Evidence) -> Verdict | None:
    fleet = e.fleet
    if fleet is None:
        return None
    if fleet.router_cpu is not None and fleet.router_cpu >= ROUTER_CPU_BUSY:
        return Verdict("router-bound", "high",
                       f"the router's process used {fleet.router_cpu:.0%} of a core: requests waited "
                       "in the router, not in the replicas", {"router_cpu": fleet.router_cpu})
    added, client = fleet.router_added_ms, fleet.client_e2e_ms
    if added is None or not client or added < ROUTER_ADDED_MS or added < ROUTER_ADDED_SHARE * client:
        return None
    figures: dict[str, float | str | bool] = {"router_added_ms": added, "client_e2e_ms": client}
    if fleet.replicas_e2e_ms is not None:
        figures["replicas_e2e_ms"] = fleet.replicas_e2e_ms
    if fleet.router_cpu is not None:
        figures["router_cpu"] = fleet.router_cpu
    return Verdict("router-bound", "medium",
                   f"the client waited {added:,.0f} ms of its {client:,.0f} ms per request beyond the "
                   f"replicas' own {fleet.replicas_e2e_ms or 0.0:,.0f} ms: the router and its hops",
                   figures)


def _judged(fleet: FleetEvidence) -> list[ReplicaFigures]:
    return [r for r in fleet.replicas if (r.processed or 0.0) >= MIN_REQUESTS
            and (r.mean_e2e_ms is not None or r.tokens_per_request_s is not None)]


def _slower(one: ReplicaFigures, others: list[ReplicaFigures]) -> tuple[float | None, float | None]:
    """How many times the others' median latency `one` took, and what fraction of their
    tokens per second it made (each None where a side lacks the figure)."""
    latencies = [r.mean_e2e_ms for r in others if r.mean_e2e_ms]
    paces = [r.tokens_per_request_s for r in others if r.tokens_per_request_s]
    times = one.mean_e2e_ms / median(latencies) if one.mean_e2e_ms and latencies else None
    pace = one.tokens_per_request_s / median(paces) if one.tokens_per_request_s and paces else None
    return times, pace


def slow_replica(e: Evidence) -> Verdict | None:
    fleet = e.fleet
    judged = _judged(fleet) if fleet is not None else []
    if fleet is None or len(judged) < 2:
        return None
    fair = FAIR_SLACK / len(fleet.replicas)
    found: list[tuple[float, ReplicaFigures, float | None, float | None]] = []
    for one in judged:
        if one.share is not None and one.share > fair:
            continue  # given more than the others: loaded, not slow (unbalanced says so)
        times, pace = _slower(one, [r for r in judged if r is not one])
        slow_latency, slow_pace = times is not None and times >= SLOW, pace is not None and pace <= 1 / SLOW
        if slow_latency or slow_pace:
            found.append((times or (1 / pace if pace else 0.0), one, times, pace))
    if not found:
        return None
    _, one, times, pace = max(found, key=lambda x: x[0])
    figures: dict[str, float | str | bool] = {"replica": one.url}
    said = []
    if times is not None:
        figures |= {"mean_e2e_ms": one.mean_e2e_ms or 0.0, "times_the_others": round(times, 2)}
        said.append(f"{times:.1f}x the others' latency per request ({one.mean_e2e_ms:,.0f} ms)")
    if pace is not None:
        figures["pace_of_the_others"] = round(pace, 3)
        said.append(f"{pace:.0%} of their tokens per second")
    if one.share is not None:
        figures["share"] = one.share
    sure = times is not None and times >= SLOW and pace is not None and pace <= 1 / SLOW
    return Verdict("slow-replica", "high" if sure else "medium",
                   f"replica {_port(one.url)} took " + " and made ".join(said)
                   + f" with {one.share or 0.0:.0%} of the requests: it is slow, not loaded", figures)


def unbalanced(e: Evidence) -> Verdict | None:
    fleet = e.fleet
    if fleet is None:
        return None
    seen = [r for r in fleet.replicas if (r.scrapes or 0) >= MIN_SCRAPES and r.mean_running is not None]
    # queueing: requests waited while it ran one or more on average (a waiting gauge that
    # caught a request on its way in to an idle replica is not a queue)
    busy = [r for r in seen if (r.max_waiting or 0.0) > 0 and (r.mean_running or 0.0) >= BUSY_RUNNING]
    if not busy or len(seen) < 2:
        return None
    hot = max(busy, key=lambda r: (r.max_waiting or 0.0, r.mean_running or 0.0))
    idle = [r for r in seen if r is not hot and (r.max_waiting or 0.0) == 0
            and (r.mean_running or 0.0) <= IDLE * (hot.mean_running or 0.0)]
    if not idle:
        return None
    cold = min(idle, key=lambda r: r.mean_running or 0.0)
    figures: dict[str, float | str | bool] = {
        "busy_replica": hot.url, "busy_max_waiting": hot.max_waiting or 0.0,
        "busy_mean_running": hot.mean_running or 0.0, "idle_replica": cold.url,
        "idle_mean_running": cold.mean_running or 0.0, "policy": fleet.policy or "unknown"}
    return Verdict("unbalanced", "high" if (cold.mean_running or 0.0) < 1 else "medium",
                   f"{_policy(fleet)} left replica {_port(hot.url)} queueing ({hot.max_waiting or 0.0:g} "
                   f"waiting, {hot.mean_running or 0.0:.1f} running on average) while replica "
                   f"{_port(cold.url)} idled ({cold.mean_running or 0.0:.1f} running on average)", figures)
