"""The simulator as one server on several nodes, like vLLM's two distributed back ends.

Ray (`--distributed-executor-backend ray`): join the running Ray cluster (`ray.init("auto")`,
as vLLM does), ask for a placement group of one GPU per rank (world size = tensor x
pipeline parallel) and wait for it with vLLM's messages, then run one worker actor per node
that holds bundles. The actors are pinged every second: one that dies (its node was killed)
ends the server, as a dead vLLM worker ends the engine.

mp (`--nnodes N --node-rank R --master-addr A --master-port P`): rank 0 listens on the
master port and waits for the N-1 others; `--headless` ranks connect (retrying while the
head is not up yet) and serve nothing themselves. A lost connection ends both sides.

`ray` is imported only here, only when asked for: the simulator needs nothing else.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from orchestrator.sim.logs import VllmLog

PG_WAIT_TIMEOUT_S = 1800.0  # vLLM's own (vllm/v1/executor/ray_utils.py), scaled by the start-up scale
_PING_EVERY_S = 1.0
_PROC = "EngineCore_DP0"


class ClusterFailed(Exception):
    """The group could not form; the message has been logged."""


class Group:
    """A formed group: `wait_lost()` returns (with why) when a member goes away."""

    def __init__(self, watch: Callable[[], str], close: Callable[[], None]) -> None:
        self._watch = watch
        self.close = close

    def wait_lost(self) -> str:
        return self._watch()


# -- Ray ----------------------------------------------------------------------------------


def join_ray(world_size: int, log: VllmLog, *, wait_scale: float, stop: threading.Event) -> Group:
    try:
        # Ray only on a multi-node simulator, where the host has it
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError:
        log.error(_PROC, "ray_utils.py:56", "Failed to import Ray: No module named 'ray'. "
                  "Please install Ray with `pip install ray`.")
        raise ClusterFailed from None
    ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
    gpus = ray.cluster_resources().get("GPU", 0)
    if world_size > gpus:
        log.warning(_PROC, "ray_utils.py:423", "The number of required GPUs exceeds the total "
                    "number of available GPUs in the placement group.")
    specs = [{"GPU": 1.0} for _ in range(world_size)]
    group = placement_group(specs, strategy="PACK")
    _wait_placed(ray, group, specs, log, wait_scale=wait_scale, stop=stop)
    actors = _start_node_workers(ray, group, PlacementGroupSchedulingStrategy, world_size, log)
    return Group(lambda: _watch_actors(ray, actors, stop), lambda: _leave_ray(ray))


def _wait_placed(ray: Any, group: Any, specs: list[dict[str, float]], log: VllmLog, *,
                 wait_scale: float, stop: threading.Event) -> None:
    """Wait for the placement group with vLLM's messages (ClusterFailed: not in time)."""
    ready = group.ready()
    timeout = PG_WAIT_TIMEOUT_S * wait_scale
    started = time.monotonic()
    interval = 10.0 * wait_scale
    while time.monotonic() - started < timeout and not stop.is_set():
        done, _ = ray.wait([ready], timeout=max(interval, 0.05))
        if done:
            return
        interval *= 2
        log.info(_PROC, "ray_utils.py:268",
                 f"Waiting for creating a placement group of specs for "
                 f"{int(min(time.monotonic() - started, timeout) / wait_scale)} seconds. "
                 f"specs={specs}. "
                 "Check `ray status` and `ray list nodes` to see if you have enough "
                 "resources, and make sure the IP addresses used by ray cluster are the same "
                 "as VLLM_HOST_IP environment variable specified in each node if you are "
                 "running on a multi-node.")
    ray.util.remove_placement_group(group)
    log.error(_PROC, "core.py:1", f"ValueError: Cannot provide a placement group requiring "
              f"{len(specs)} GPUs (placement_group_specs={specs}) within "
              f"{PG_WAIT_TIMEOUT_S:.0f} seconds.\nTensor parallel size may exceed available "
              "GPUs in your cluster. Check resources with `ray status` and `ray list nodes`.")
    raise ClusterFailed


def _start_node_workers(ray: Any, group: Any, strategy: Any, world_size: int,
                        log: VllmLog) -> list[Any]:
    """One actor per node: on the first bundle placed on each node."""
    table = ray.util.placement_group_table(group)
    first_bundle: dict[str, int] = {}
    for index, node_id in sorted(table["bundles_to_node_id"].items()):
        first_bundle.setdefault(node_id, int(index))
    worker = ray.remote(num_gpus=1, num_cpus=0)(NodeWorker)
    actors = [worker.options(scheduling_strategy=strategy(
        placement_group=group, placement_group_bundle_index=index)).remote()
        for index in first_bundle.values()]
    where = ray.get([a.where.remote() for a in actors], timeout=120)
    per_node: dict[str, int] = {}
    for node_id in table["bundles_to_node_id"].values():
        per_node[node_id] = per_node.get(node_id, 0) + 1
    for (address, pid), node_id in zip(where, first_bundle, strict=True):
        log.info(_PROC, "ray_executor.py:1", f"worker on node {address} (pid {pid}) holds "
                 f"{per_node[node_id]} of the {world_size} ranks")
    return actors


def _watch_actors(ray: Any, actors: list[Any], stop: threading.Event) -> str:
    """Ping the actors every second; why one went away, once it does."""
    while not stop.is_set():
        try:
            ray.get([a.where.remote() for a in actors], timeout=30)
        except ray.exceptions.GetTimeoutError:
            continue  # a node under load, or being declared dead: ask again
        except Exception as error:  # an actor or its node died
            return f"{type(error).__name__}: {_first_line(str(error))}"
        stop.wait(_PING_EVERY_S)
    return ""


def _leave_ray(ray: Any) -> None:
    # The placement group goes with the driver; leaving the cluster must not hang on a
    # node that is gone (a daemon thread, given a few seconds).
    def shutdown() -> None:
        with contextlib.suppress(Exception):
            ray.shutdown()

    closing = threading.Thread(target=shutdown, daemon=True)
    closing.start()
    closing.join(timeout=3)


class NodeWorker:
    """One simulated worker process per node (a Ray actor)."""

    def where(self) -> tuple[str, int]:
        # Ray only on a multi-node simulator, where the host has it
        import ray

        return ray.util.get_node_ip_address(), os.getpid()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


# -- vLLM's multi-process mode -----------------------------------------------------------------


def mp_head(nnodes: int, address: str, port: int, log: VllmLog, *, timeout: float,
            stop: threading.Event) -> Group:
    """Rank 0: wait for the other ranks on the master port."""
    server = socket.create_server((address, port), reuse_port=True)
    server.settimeout(0.5)
    members: dict[int, socket.socket] = {}
    deadline = time.monotonic() + timeout
    log.info(_PROC, "multiproc_executor.py:1", f"waiting for {nnodes - 1} node(s) on "
             f"{address}:{port} (--nnodes {nnodes})")
    while len(members) < nnodes - 1:
        if stop.is_set() or time.monotonic() > deadline:
            server.close()
            for sock in members.values():
                sock.close()
            missing = sorted(set(range(1, nnodes)) - set(members))
            log.error(_PROC, "core.py:1", "torch.distributed.DistNetworkError: timed out after "
                      f"{timeout:.0f}s waiting for node rank(s) {missing} to connect to "
                      f"{address}:{port}")
            raise ClusterFailed
        try:
            conn, peer = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(5)
        try:
            rank = int(conn.recv(16).decode().strip() or "0")
        except (OSError, ValueError):
            conn.close()
            continue
        conn.settimeout(None)
        members[rank] = conn
        log.info(_PROC, "multiproc_executor.py:1", f"node rank {rank} joined from {peer[0]}")
    server.close()
    return Group(lambda: _watch_sockets(members, stop), lambda: _close_all(members.values()))


def mp_worker(rank: int, address: str, port: int, log: VllmLog, *, timeout: float,
              stop: threading.Event) -> Group:
    """A headless rank: connect to the head (it may not be up yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((address, port), timeout=5)
            break
        except OSError as error:
            if stop.is_set() or time.monotonic() > deadline:
                log.error(_PROC, "core.py:1", f"torch.distributed.DistNetworkError: cannot "
                          f"reach the master at {address}:{port}: {error}")
                raise ClusterFailed from None
            stop.wait(0.5)
    sock.sendall(f"{rank}\n".encode())
    sock.settimeout(None)
    log.info(_PROC, "multiproc_executor.py:1", f"node rank {rank} joined the master at {address}:{port}")
    return Group(lambda: _watch_sockets({0: sock}, stop), lambda: _close_all([sock]))


def _watch_sockets(members: dict[int, socket.socket], stop: threading.Event) -> str:
    for sock in members.values():
        sock.settimeout(0.5)
    while not stop.is_set():
        for rank, sock in members.items():
            try:
                if sock.recv(1) == b"":
                    return f"node rank {rank} closed its connection"
            except TimeoutError:
                continue
            except OSError as error:
                return f"node rank {rank}: {error}"
    return ""


def _close_all(sockets: Any) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()
