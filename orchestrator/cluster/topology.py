"""The nodes of a multi-node server, from the plan and the inventory (pure).

Ray (`backend: ray`): every node runs a Ray node (`ray start --head` on the head, `ray start
--address=HEAD:PORT` on the workers, both `--block` so the service backend supervises them),
and the head runs `vllm serve ... --distributed-executor-backend ray`, which places its
workers on the whole cluster.

The engine's own multi-process mode (`backend: mp`): every node runs the server with the
flags its engine declares (`Engine.multi_node`; vLLM's `--nnodes N --node-rank R --master-addr
HEAD --master-port P`); the workers add its headless switch (no API server). The head serves.

World size = tensor x pipeline parallel = nodes x GPUs per node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.engines.base import Engine, MultiNode
from orchestrator.engines.layout import EngineFlags, Layout
from orchestrator.engines.layout import layout as read_layout
from orchestrator.errors import PlanError

Role = Literal["head", "worker"]
# An address a node is reached at: an IPv4/IPv6 literal or a DNS name, nothing a shell or
# Ray's address parser would read differently.
_ADDRESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:-]*")


@dataclass(frozen=True)
class Node:
    host: str  # inventory name
    rank: int  # 0 is the head
    address: str  # where the other nodes reach it
    ray_args: tuple[str, ...] = ()  # its own: `${host.X}` in them is filled per host

    @property
    def role(self) -> Role:
        return "head" if self.rank == 0 else "worker"


@dataclass(frozen=True)
class Topology:
    backend: Literal["ray", "mp"]
    nodes: tuple[Node, ...]  # the head first
    gpus_per_node: int | None  # declared in the plan; None: what the probe finds
    tensor: int
    pipeline: int
    ray_port: int
    master_port: int
    multi_node: MultiNode  # the engine's flags and variable for them

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> tuple[Node, ...]:
        return self.nodes[1:]

    @property
    def world_size(self) -> int:
        return self.tensor * self.pipeline

    def node(self, host: str) -> Node:
        return next(n for n in self.nodes if n.host == host)

    @property
    def ray_address(self) -> str:
        return f"{_bracket(self.head.address)}:{self.ray_port}"

    def gpus_needed_per_node(self) -> int:
        return self.world_size // len(self.nodes)

    def layout_problem(self, gpus_per_node: int) -> str | None:
        """Why `gpus_per_node` GPUs on each node cannot hold the layout (None: they can)."""
        total = gpus_per_node * len(self.nodes)
        if self.world_size != total:
            return (f"tensor x pipeline parallel = {self.tensor} x {self.pipeline} = "
                    f"{self.world_size} GPUs, but {len(self.nodes)} node(s) x {gpus_per_node} "
                    f"GPU(s) = {total}")
        return None

    # -- what each node runs --------------------------------------------------------------

    def ray_node_argv(self, node: Node, venv_bin: str) -> list[str]:
        """`ray start` for `node`, in the foreground (the service backend supervises it).
        Without a declared GPU count Ray counts the node's GPUs itself."""
        argv = [f"{venv_bin}/ray", "start", "--block", "--disable-usage-stats",
                f"--node-ip-address={node.address}"]
        if self.gpus_per_node is not None:
            argv.append(f"--num-gpus={self.gpus_per_node}")
        if node.role == "head":
            argv += ["--head", f"--port={self.ray_port}", "--include-dashboard=false"]
        else:
            argv += [f"--address={self.ray_address}"]
        return argv + list(node.ray_args)

    def server_flags(self, node: Node) -> list[str]:
        """The server flags, in its engine's names, that make `node` part of the group."""
        names = self.multi_node
        if self.backend == "ray":
            return [f"--{names.executor}", "ray"]
        flags = [f"--{names.executor}", "mp", f"--{names.nodes}", str(len(self.nodes)),
                 f"--{names.rank}", str(node.rank), f"--{names.master_addr}", self.head.address,
                 f"--{names.master_port}", str(self.master_port)]
        return flags + ([f"--{names.headless}"] if names.headless and node.role == "worker" else [])

    def node_env(self, node: Node) -> dict[str, str]:
        """The variable the engine reads its node's own address from (vLLM's VLLM_HOST_IP:
        Ray placement and NCCL), for the server and for the Ray node beside it."""
        variable = self.multi_node.host_ip_env
        return {variable: node.address} if variable else {}

    def server_env(self, node: Node) -> dict[str, str]:
        """The node's address (`node_env`); RAY_ADDRESS names the cluster `ray.init("auto")` joins."""
        env = self.node_env(node)
        if self.backend == "ray":
            env["RAY_ADDRESS"] = self.ray_address
        return env


def _bracket(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def layout(args: Mapping[str, object], extra_args: Sequence[str], flags: EngineFlags) -> Layout:
    """The layout in the engine's flags (engines/layout.py); a size that is no positive whole
    number is a plan error."""
    found = read_layout(args, extra_args, flags)
    for flag, value in found.invalid.items():
        raise PlanError(f"{flag} must be a positive whole number, got {value!r}",
                        field=f"service.args.{flag}")
    return found


def spanning(engine: Engine) -> MultiNode:
    """The engine's multi-node flags; a plan error for an engine that declares none."""
    if engine.multi_node is None:
        raise PlanError(f"{engine.display} cannot span nodes: engine {engine.name} declares no "
                        "multi-node flags", field="service.nodes",
                        expected="no service.nodes (one server per host), or an engine that "
                                 "declares them (vllm, sim)")
    return engine.multi_node


def _check_addresses(ordered: list[str], addresses: Mapping[str, str]) -> None:
    """Each node's address is an address, and its own (a `${host.` reference stands in for
    one at `orch validate`, which has no inventory)."""
    for host in ordered:
        if "${host." in addresses[host]:
            continue
        if not _ADDRESS.fullmatch(addresses[host]):
            raise PlanError(f"node {host}: {addresses[host]!r} is not an address",
                            field="service.nodes.address",
                            expected="an IP address or a DNS name (a host variable such as "
                                     "${host.cluster_ip})")
    shared: dict[str, list[str]] = {}
    for host in ordered:
        if "${host." not in addresses[host]:
            shared.setdefault(addresses[host], []).append(host)
    for address, names in shared.items():
        if len(names) > 1:  # a worker would join itself: found only after the join timeout
            raise PlanError(
                f"nodes {' and '.join(names)} share the address {address}: each node must be "
                "reached at its own (a loopback address is every machine's own)",
                field="service.nodes.address",
                expected="${host.address} (the default) or a host variable naming each "
                         "node's address")


def build(
    *, backend: Literal["ray", "mp"], hosts: list[str], head: str | None,
    addresses: Mapping[str, str], args: Mapping[str, object], gpus_per_node: int | None,
    ray_port: int, master_port: int, ray_args: Sequence[str] | Mapping[str, Sequence[str]],
    engine: Engine, know_hosts: bool = True, extra_args: Sequence[str] = (),
) -> Topology:
    """The topology of `hosts` (the plan's hosts, in inventory order), located errors for
    what cannot work: an engine that cannot span nodes, an unknown head, a bad address, a
    layout the GPUs cannot hold. `ray_args`: one list for every node, or each host's own;
    `engine`: whose flags (its names of the parallel sizes and of the multi-node flags)."""
    multi_node, flags = spanning(engine), engine.flags
    if head is not None and head not in hosts:
        raise PlanError(f"the head {head!r} is not among the plan's hosts ({', '.join(hosts)})",
                        field="service.nodes.head", expected="one of the plan's hosts")
    ordered = [head or hosts[0]] + [h for h in hosts if h != (head or hosts[0])]
    _check_addresses(ordered, addresses)
    sizes = layout(args, extra_args, flags)
    if sizes.data > 1:
        raise PlanError("data parallelism across nodes is not supported by service.nodes yet",
                        field=f"service.args.{flags.data}",
                        expected="tensor and pipeline parallel sizes only")
    topology = Topology(
        backend=backend,
        nodes=tuple(Node(h, rank, addresses[h],
                         tuple(ray_args[h] if isinstance(ray_args, Mapping) else ray_args))
                    for rank, h in enumerate(ordered)),
        gpus_per_node=gpus_per_node, tensor=sizes.tensor, pipeline=sizes.pipeline,
        ray_port=ray_port, master_port=master_port, multi_node=multi_node,
    )
    if gpus_per_node is not None and know_hosts:  # `orch validate` does not know the hosts
        problem = topology.layout_problem(gpus_per_node)
        if problem:
            raise PlanError(problem, field="service.args",
                            expected=f"{flags.tensor or 'tensor'} x {flags.pipeline or 'pipeline'}"
                                     " = nodes x service.nodes.gpus")
    return topology


# -- what runs where, for `orch status|logs|stop` (no addresses needed) -----------------------


def head_of(hosts: list[str], head: str | None) -> str:
    return head if head is not None and head in hosts else hosts[0]


def units(backend: Literal["ray", "mp"], hosts: list[str], head: str | None) -> list[tuple[str, str | None]]:
    """(host, unit) of every supervised process, the head first; unit None is the server
    (headless on an mp worker), "ray" a Ray node."""
    first = head_of(hosts, head)
    ordered = [first, *(h for h in hosts if h != first)]
    if backend == "mp":
        return [(h, None) for h in ordered]
    return [(first, None), (first, "ray"), *((h, "ray") for h in ordered[1:])]


def stop_order(backend: Literal["ray", "mp"], hosts: list[str], head: str | None) -> list[tuple[str, str | None]]:
    """The group goes down head's server first (it would fail on losing a worker), then under
    Ray the workers' Ray nodes before the head's (the GCS last)."""
    listed = units(backend, hosts, head)
    if backend == "mp":
        return listed
    first = head_of(hosts, head)
    return [(first, None), *((h, u) for h, u in listed if h != first), (first, "ray")]
