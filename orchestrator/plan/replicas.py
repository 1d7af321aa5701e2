"""The replicas of a fleet plan, derived from its hosts and `replicas:` (pure).

One replica per host keeps the host's name, the service's name and port: a fleet of one-
replica hosts is the plain plan on each host. Several per host are `<host>-r<i>`, each with
its own service name (`<name>-r<i>`), port (`port + i * port_step`) and GPU set
(CUDA_VISIBLE_DEVICES), so their units, pidfiles, logs and locks never meet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.plan.models import Plan
from orchestrator.plan.models.fleet import Replicas

Role = Literal["both", "prefill", "decode"]


@dataclass(frozen=True)
class Replica:
    """One server of the fleet: where it runs and what sets it apart."""

    id: str  # names its folder in the run and its line in every table
    host: str  # the inventory host it runs on
    index: int  # its place on the host (0 when one per host)
    port: int
    service: str  # its service name (unit, pidfile)
    gpus: tuple[int, ...] | None  # its CUDA_VISIBLE_DEVICES (None: the host's, untouched)
    role: Role = "both"

    def url(self, address: str) -> str:
        """Its base URL at `address` (the host's address as the router reaches it)."""
        return f"http://{address}:{self.port}"


def replicas_of(plan: Plan, hosts: Sequence[str]) -> list[Replica]:
    """Every replica of `plan` on `hosts` (in order: host by host, index by index); a plan
    without `router:`/`replicas:` has one per host."""
    spec = plan.replicas or Replicas()
    service = plan.service
    port = service.port if service is not None else 0
    name = service.name if service is not None else ""
    found: list[Replica] = []
    for host in hosts:
        for index in range(spec.per_host):
            several = spec.per_host > 1
            gpus = (tuple(range(index * spec.gpus, (index + 1) * spec.gpus))
                    if spec.gpus is not None else None)
            found.append(Replica(
                id=f"{host}-r{index}" if several else host, host=host, index=index,
                port=port + index * spec.port_step,
                service=f"{name}-r{index}" if several else name, gpus=gpus))
    if spec.prefill is not None:
        found = [_role(r, "prefill" if n < spec.prefill else "decode")
                 for n, r in enumerate(found)]
    return found


def _role(replica: Replica, role: Role) -> Replica:
    return Replica(replica.id, replica.host, replica.index, replica.port, replica.service,
                   replica.gpus, role)


def gpus_needed(plan: Plan) -> int | None:
    """GPUs each host must have for its replicas (None: the plan does not say)."""
    spec = plan.replicas
    return None if spec is None or spec.gpus is None else spec.per_host * spec.gpus


# vLLM's P/D connector as its examples run both halves; the router pulls the KV with NIXL
# (its --kv-connector default). A plan's own `kv-transfer-config` wins.
PD_CONNECTOR = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
NIXL_SIDE_CHANNEL_PORT = 5600  # vLLM's default; replica i of a host takes 5600 + i


def replica_plan(plan: Plan, replica: Replica) -> Plan:
    """`plan` as `replica` runs it: its service name and port, its GPUs in the service's
    environment, a P/D half its KV connector. One replica per host without `gpus:` is
    `plan` itself."""
    if plan.service is None:
        return plan
    args = dict(plan.service.args)
    env = dict(plan.env)
    if replica.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in replica.gpus)
    if replica.role != "both":
        args.setdefault("kv-transfer-config", dict(PD_CONNECTOR))
        env.setdefault("VLLM_NIXL_SIDE_CHANNEL_PORT", str(NIXL_SIDE_CHANNEL_PORT + replica.index))
    service = plan.service.model_copy(
        update={"name": replica.service, "port": replica.port, "args": args})
    return plan.model_copy(update={"service": service, "env": env})
