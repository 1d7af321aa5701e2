"""A Ray cluster that does not form names the hosts that never joined: a real Ray 2.60 head
in a network namespace (its only address is the one the plan gives it: Ray will not take a
loopback address as a node's), reached over its sshd as the head's server step reaches it,
and a second node declared at an address where nothing runs."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.netns import NetnsHost, NetnsHosts
from fixtures.realpkgs import ray_venv

from orchestrator.cluster.gate import ClusterError
from orchestrator.cluster.member import wait_for_ray
from orchestrator.cluster.ray_status import parse_ray_status
from orchestrator.cluster.topology import Node, Topology
from orchestrator.engines import engine
from orchestrator.transport.base import Transport
from orchestrator.transport.connect import connect

pytestmark = pytest.mark.slow
PORT = 6379
MULTI_NODE = engine("vllm").multi_node
assert MULTI_NODE is not None


def _start_head(ray: list[str], host: NetnsHost, temp: str) -> tuple[subprocess.Popen[bytes], bool]:
    """A head on `host`, and whether `ray status` saw it within 90 s."""
    process = subprocess.Popen(
        ["ip", "netns", "exec", host.netns, *ray, "start", "--head", "--block",
         f"--port={PORT}", f"--node-ip-address={host.address}", "--num-gpus=8",
         "--num-cpus=1", "--include-dashboard=false", "--object-store-memory=78643200",
         f"--temp-dir={temp}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        result = subprocess.run(
            ["ip", "netns", "exec", host.netns, *ray, "status",
             f"--address={host.address}:{PORT}"],
            capture_output=True, text=True, check=False, timeout=60)
        if parse_ray_status(result.stdout) is not None:
            return process, True
        time.sleep(1)
    return process, False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """By its process group (never `ray stop`, which would end every Ray on this machine)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
            process.wait(10)
            break
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue
    with contextlib.suppress(ProcessLookupError):  # whatever of Ray outlived its parent
        os.killpg(process.pid, signal.SIGKILL)


def _why(temp: str) -> str:
    """The last lines of Ray's own error logs of a head that did not come up."""
    logs = sorted(Path(temp).glob("session_*/logs/*.err"))
    lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()[-3:]]
    return "\n".join(lines[-6:]) or "(no Ray log)"


@pytest.fixture(scope="module")
def head(netns_hosts: NetnsHosts) -> Iterator[tuple[Path, NetnsHost, Transport]]:
    """A real head with 8 GPUs declared on n1. Ray's own agents must register within its
    time-outs, which a fully loaded 2-core machine (a real vLLM compiling beside it) can miss:
    a head that exits before it is up is started once more (the tests are about orch's wait,
    not Ray's start), with what Ray logged said if that fails too."""
    venv, host = ray_venv(), netns_hosts.hosts[0]
    ray = [str(venv / "bin" / "ray")]
    transport: Transport | None = None
    temps: list[str] = []
    process: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(2):
            # short: Ray's socket paths under it must stay within 107 bytes
            temps.append(tempfile.mkdtemp(prefix="r", dir="/tmp"))
            process, up = _start_head(ray, host, temps[-1])
            if up:
                break
            _stop(process)
        assert up, f"the Ray head did not come up twice (exit {process.poll()}): {_why(temps[-1])}"
        transport = connect(host.name, netns_hosts.inventory())
        yield venv, host, transport
    finally:
        if transport is not None:
            transport.close()
        if process is not None:
            _stop(process)
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)


def test_a_worker_that_never_joins_is_named_by_host(
    head: tuple[Path, NetnsHost, Transport],
) -> None:
    venv, host, transport = head
    nodes = (Node(host.name, 0, host.address), Node("gpu2", 1, "10.255.0.2"))
    topology = Topology("ray", nodes, gpus_per_node=8, tensor=8, pipeline=2, ray_port=PORT,
                        master_port=29500, multi_node=MULTI_NODE)
    with pytest.raises(ClusterError) as raised:
        wait_for_ray(transport, topology, str(venv / "bin"), timeout=1, gpus=16,
                     sleep=lambda _: None)
    message, hint = raised.value.message, raised.value.hint or ""
    assert "1 of 2 nodes, 8 of 16 GPUs; not joined: gpu2 (10.255.0.2)" in message, message
    assert "--limit gpu2 --unit ray" in hint


def test_a_formed_cluster_is_not_waited_for(head: tuple[Path, NetnsHost, Transport]) -> None:
    venv, host, transport = head
    alone = Topology("ray", (Node(host.name, 0, host.address),), gpus_per_node=8, tensor=8,
                     pipeline=1, ray_port=PORT, master_port=29500, multi_node=MULTI_NODE)
    status = wait_for_ray(transport, alone, str(venv / "bin"), timeout=30, gpus=8)
    assert status.active_nodes == 1 and status.gpus == 8
