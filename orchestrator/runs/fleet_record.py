"""fleet.json: what a fleet's apply brought up, the replicas and the router in front of them.

    {"state": "degraded", "min_ready": 2,
     "replicas": [{"id": "n1", "host": "n1", "url": "http://10.0.0.5:8000", "role": "both",
                   "state": "ready"}, ...],
     "router": {"host": "orch-router", "url": "http://127.0.0.1:30000",
                "metrics_url": "http://127.0.0.1:29000", "version": "0.1.17",
                "policy": "round_robin", "mode": "regular", "workers": ["http://..."]}}

`state`: `ready` (every replica serves behind the router), `degraded` (fewer, but at least
min_ready), `failed` (the router or too few replicas).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from orchestrator.runs.run_records import Record

FleetState = Literal["ready", "degraded", "failed"]


class ReplicaRecord(Record):
    id: str
    host: str
    url: str  # as the router reaches it
    role: str  # both, prefill, decode
    state: Literal["ready", "failed"]
    error: str | None = None


class RouterRecord(Record):
    host: str  # its place in the run (router.name)
    url: str | None = None  # as this machine reached it
    metrics_url: str | None = None
    version: str
    policy: str
    mode: str
    workers: list[str] = Field(default_factory=list)  # what it listed once registered
    error: str | None = None


class FleetRecord(Record):
    state: FleetState
    min_ready: int
    replicas: list[ReplicaRecord]
    router: RouterRecord
