"""What one supervised process on a node does in its group: vote, and keep the start order.

A node runs one or two of them: under Ray its Ray node (every host) and, on the head, the
server; under mp the server (`--headless` on the workers). The first one on each node votes
(gate.py); the head's server under Ray reads the same decision.

Start order, kept by the changes' `before`/`after` hooks during apply:

    ray:  every node stops (the head its server first) -> the head's Ray node starts ->
          the workers' Ray nodes start -> `ray status` shows every node and GPU -> the
          head's server starts
    mp:   every node stops -> the head's server starts -> the workers' (headless) start
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.cluster.gate import MATCHING, ClusterError, Decision, Gate, Vote
from orchestrator.cluster.ray_status import (
    ALIVE_ADDRESSES,
    RayStatus,
    not_joined,
    parse_alive_addresses,
    parse_ray_status,
)
from orchestrator.cluster.topology import Node, Topology
from orchestrator.cluster.watch import parse_unit_state, unit_state_command
from orchestrator.errors import OrchError
from orchestrator.facts import Facts
from orchestrator.service.step import GroupDecision, ServiceStep
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command

Kind = Literal["ray-node", "server"]
_POLL_S = 2.0
_ASK_RAY_S = 30.0  # the driver that names the nodes missing (seconds when Ray answers)
# `ray status` waits this long for a GCS to answer, three times over when none does (the
# GCS, its pubsub, the cluster id: 5 s each by Ray's own defaults, 30 s for the last; a head
# whose Ray node died at its start was waited for 40 s, then 16): the wait polls again, and
# looks at the head's Ray node, instead. A GCS that runs answers in milliseconds.
_GCS_CONNECT_S = 2


@dataclass
class Member:
    gate: Gate
    node: Node
    kind: Kind
    venv_bin: str
    pins: tuple[str, ...] = ()  # names the plan pins (compared across nodes too)
    join_timeout: float = 600.0
    also_stop: list[Command] = field(default_factory=list)  # stopped before this one
    # The head's server under Ray: the head's Ray node, whose death ends the wait for the
    # cluster at once (a Ray node that cannot start would otherwise be waited for in vain).
    ray_node: ServiceStep | None = None

    @property
    def topology(self) -> Topology:
        return self.gate.topology

    @property
    def votes(self) -> bool:
        """The first unit on each node votes: the Ray node under Ray, the server under mp."""
        return self.kind == "ray-node" or self.topology.backend == "mp"

    def decide(self, reason: str | None, facts: Facts) -> Decision:
        if not self.votes:
            # The head's server under Ray: its Ray node voted already, in this thread.
            return self.gate.vote(self.node.host, Vote(reason=None))
        installed = facts.venv.installed() if facts.venv is not None else {}
        names = {*MATCHING, *self.pins}
        packages = {n: v for n, v in installed.items() if n in names}
        gpus = len(facts.host.gpus) if facts.host.gpus is not None else None
        return self.gate.vote(self.node.host, Vote(reason=reason, packages=packages, gpus=gpus))

    def gpus(self, facts: Facts) -> int:
        """What this node offers Ray: the declared count, else the GPUs found."""
        declared = self.topology.gpus_per_node
        if declared is not None:
            return declared
        return len(facts.host.gpus) if facts.host.gpus is not None else 0

    # -- hooks ------------------------------------------------------------------------------

    def stopped(self) -> Callable[[Transport], None]:
        return lambda _t: self.gate.mark(self.node.host, f"stopped:{self.kind}")

    def started(self) -> Callable[[Transport], None]:
        return lambda _t: self.gate.mark(self.node.host, f"up:{self.kind}")

    def before_start(self, decision: GroupDecision) -> Callable[[Transport], None]:
        everyone = [n.host for n in self.topology.nodes]
        head = [self.topology.head.host]

        def wait(transport: Transport) -> None:
            if self.kind == "ray-node" or self.topology.backend == "mp":
                if not decision.restart:
                    return  # only this node (re)starts: the others run
                if self.node.role == "head":
                    self.gate.wait_for(everyone, f"stopped:{self.kind}")
                else:
                    self.gate.wait_for(head, f"up:{self.kind}")
                return
            if decision.restart:  # the head's server under Ray: after every Ray node
                self.gate.wait_for(everyone, "up:ray-node")
            wait_for_ray(transport, self.topology, self.venv_bin, self.join_timeout,
                         gpus=self.topology.world_size, head_node=self.ray_node,
                         lost=self.gate.lost)
            self.gate.mark(self.node.host, "formed")  # the workers stop watching their nodes
        return wait


def ray_status_command(topology: Topology, venv_bin: str) -> Command:
    return Command("env", f"RAY_py_gcs_connect_timeout_s={_GCS_CONNECT_S}",
                   f"RAY_gcs_rpc_server_connect_timeout_s={_GCS_CONNECT_S}", f"{venv_bin}/ray",
                   "status", f"--address={topology.ray_address}")


def wait_for_ray(transport: Transport, topology: Topology, venv_bin: str, timeout: float,
                 *, gpus: int, sleep: Callable[[float], None] = time.sleep,
                 head_node: ServiceStep | None = None,
                 lost: Callable[[], dict[str, str]] | None = None) -> RayStatus:
    """Until `ray status` on the head shows every node and `gpus` GPUs. With `head_node`
    (the head's Ray node), a head that does not answer because its Ray node died ends the
    wait at once, with the last line of that node's log (looked at before the first `ray
    status` too: with its head gone, that waits out the GCS time-outs first, 16 s seen);
    `lost` says which workers' Ray nodes died (each worker watches its own, watch.py),
    which ends it too."""
    deadline = time.monotonic() + timeout
    status: RayStatus | None = None
    text = ""
    if head_node is not None:  # dead already (one that cannot start exits within seconds):
        _head_node_alive(transport, head_node)  # `ray status` would wait 16 s before saying so
    while True:
        result = transport.run(ray_status_command(topology, venv_bin), check=False, timeout=60)
        text = result.stdout + result.stderr
        status = parse_ray_status(result.stdout)
        if status is not None and status.complete(len(topology.nodes), gpus):
            return status
        if status is None and head_node is not None:
            _head_node_alive(transport, head_node)
        gone = lost() if lost is not None else {}
        if gone:
            raise ClusterError(
                "; ".join(f"{host}: {why}" for host, why in gone.items()),
                hint=f"orch logs PLAN --limit {next(iter(gone))} --unit ray shows that node's "
                     "whole log")
        if time.monotonic() > deadline:
            break
        sleep(_POLL_S)
    seen = (f"{status.active_nodes} of {len(topology.nodes)} nodes, {status.gpus:g} of {gpus} "
            "GPUs" if status is not None else "no answer from the Ray head: "
            + (text.strip().splitlines() or ["(nothing)"])[-1])
    missing = _not_joined(transport, topology, venv_bin) if status is not None else []
    if missing:
        seen += "; not joined: " + ", ".join(f"{host} ({address})" for host, address in missing)
    worker = missing[0][0] if missing else "WORKER"
    raise ClusterError(
        f"the Ray cluster did not form within {timeout:.0f}s: {seen}",
        hint=f"a worker that never joined: its Ray log (orch logs PLAN --limit {worker} --unit "
             "ray) names the cause; check that the nodes reach "
             f"{topology.ray_address} and that their ray versions match")


def _head_node_alive(transport: Transport, head_node: ServiceStep) -> None:
    """A ClusterError when the head's Ray node is dead (nothing will answer for it)."""
    result = transport.run(unit_state_command(head_node), check=False, timeout=60)
    state, error_line = parse_unit_state(result.stdout)
    if state != "dead":
        return
    said = f"; its log: {error_line}" if error_line else ""
    raise ClusterError(
        f"the head's Ray node (unit {head_node.paths.name}) died before the cluster "
        f"formed{said}",
        hint="orch logs PLAN --unit ray shows its whole log (a port taken by another "
             "program, a Ray argument in service.nodes.ray_args, its temp folder)")


def _not_joined(
    transport: Transport, topology: Topology, venv_bin: str
) -> list[tuple[str, str]]:
    """The nodes missing from the cluster, by host, asked of Ray once it has failed to form
    (a driver takes seconds; an empty list when it cannot tell)."""
    try:
        result = transport.run(
            Command(f"{venv_bin}/python", "-c", ALIVE_ADDRESSES, topology.ray_address),
            check=False, timeout=_ASK_RAY_S,
        )
    except OrchError:  # a hung driver or a lost head: the counts still say what failed
        return []
    alive = parse_alive_addresses(result.stdout)
    if alive is None or topology.head.address not in alive:
        return []  # no answer, or Ray knows the nodes by other addresses than the plan's
    return not_joined(((n.host, n.address) for n in topology.nodes), alive)
