"""The fleet: several replicas of a plan's server behind vLLM's router. The replicas' hosts
as the apply reaches them (inventory.py), the router as a service of its own
(router_service.py), its readiness and its workers (router_ready.py, registration.py), what
the replicas' runs tell the router (gate.py) and the run's record (record.py); the moves
after the replicas run: the rolling redeploy (roll.py), the drain that lets a replica's
requests finish first (drain.py), the repair after faults (watch.py). The apply's flow of a
fleet is apply/fleet.py; it provides the per-replica work through `member.ReplicaOps`."""
