"""The fleet's verdicts on evidence built in code: unbalanced names both replicas and the
policy, and its advice is a load-aware policy in plan terms; a replica slow because it was
given more than its share is unbalanced, not slow; a router at a core is router-bound, but a
busy client still comes first."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.limits.advice import advice
from orchestrator.limits.evidence import Evidence, gather
from orchestrator.limits.fleet_evidence import FleetEvidence, ReplicaFigures
from orchestrator.limits.rules import limiter
from orchestrator.runs.run_records import LevelResult

A, B, C = "http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000"


def replica(url: str, *, share: float, running: float, waiting: float = 0.0, e2e: float = 100.0) -> ReplicaFigures:
    return ReplicaFigures(url=url, processed=60 * share, failed=0.0, share=share, scrapes=10,
                          max_running=running, mean_running=running, max_waiting=waiting,
                          mean_e2e_ms=e2e, tokens_per_request_s=None)


def evidence(*replicas: ReplicaFigures, policy: str | None = "round_robin", cpu: float | None = None,
             client_cpu: float = 0.3) -> Evidence:
    level = LevelResult.model_validate({"level": "c8", "mode": "closed", "max_concurrency": 8, "completed": 60,
                                        "duration": 10.0, "client_cpu_utilization": client_cpu})
    fleet = FleetEvidence(policy=policy, replicas=replicas, retries=0.0, router_cpu=cpu, router_added_ms=None,
                          client_e2e_ms=None, replicas_e2e_ms=None)
    return replace(gather(level), fleet=fleet)


def test_unbalanced_names_both_replicas_and_the_policy() -> None:
    verdict = limiter(evidence(replica(A, share=0.7, running=7.0, waiting=4.0, e2e=300.0),
                               replica(B, share=0.2, running=0.5), replica(C, share=0.1, running=1.5),
                               policy="consistent_hash"))
    assert (verdict.name, verdict.confidence) == ("unbalanced", "high")
    assert verdict.figures["busy_replica"] == A and verdict.figures["idle_replica"] == B
    assert "policy consistent_hash" in verdict.why and "10.0.0.1:8000" in verdict.why and "10.0.0.2:8000" in verdict.why
    suggestions, _ = advice(verdict, flags=None)
    assert [s.matrix for s in suggestions] == [{"router.policy": ["power_of_two", "cache_aware"]}]
    already = replace(verdict, figures={**verdict.figures, "policy": "power_of_two"})
    assert [s.matrix for s in advice(already, flags=None)[0]] == [{"router.policy": ["cache_aware"]}]


def test_a_replica_slow_only_because_it_was_given_more_is_not_slow() -> None:
    fair = [replica(B, share=0.3, running=2.0), replica(C, share=0.3, running=2.0)]
    loaded = limiter(evidence(replica(A, share=0.4, running=8.0, waiting=3.0, e2e=300.0), *fair))
    assert loaded.name == "slow-replica"  # 0.4 is within 1.25 x a third: its fair share
    given_more = limiter(evidence(replica(A, share=0.5, running=8.0, waiting=3.0, e2e=300.0),
                                  replica(B, share=0.25, running=1.0), replica(C, share=0.25, running=1.0)))
    assert given_more.name == "unbalanced", given_more


def test_a_router_at_a_core_is_router_bound_after_a_busy_client() -> None:
    even = [replica(A, share=0.5, running=2.0), replica(B, share=0.5, running=2.0)]
    assert limiter(evidence(*even, cpu=0.97)).name == "router-bound"
    assert limiter(evidence(*even, cpu=0.97, client_cpu=0.95)).name == "client-bound"
    assert limiter(evidence(*even, cpu=0.5)).name == "not-enough-evidence"
