"""The wait for a Ray cluster whose head's Ray node is dead before the wait begins (one that
cannot start exits within seconds of its launch): it ends on that node's state and log,
without asking `ray status`, which waits out its GCS time-outs (16 s seen) before it says
that nothing answers. Over a real local transport, with a head's state folder on disk and
a `ray` that leaves a mark when run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from orchestrator.cluster.gate import ClusterError
from orchestrator.cluster.member import wait_for_ray
from orchestrator.cluster.topology import build
from orchestrator.engines import engine
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.service.backends import ServicePaths
from orchestrator.service.step import ServiceStep
from orchestrator.transport.connect import connect

PORT_TAKEN = ("ValueError: Ray component worker_ports is trying to use a port number 16399 "
              "that is used by other components.")


@dataclass(frozen=True)
class RayUnit:
    """What the wait reads of the head's Ray node: how it is supervised and where."""

    backend: str
    paths: ServicePaths


def test_a_head_ray_node_dead_before_the_wait_ends_it_without_asking_ray(tmp_path: Path) -> None:
    paths = ServicePaths.for_venv(str(tmp_path / "venv"), "c-ray")
    Path(paths.state_dir).mkdir(parents=True)
    Path(paths.log).write_text(f"INFO scripts.py:1043 -- Local node IP: 10.0.0.1\n{PORT_TAKEN}\n")
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "ray-was-asked"
    (bin_dir / "ray").write_text(f"#!/bin/sh\ntouch {asked}\n")  # a GCS that never answers
    (bin_dir / "ray").chmod(0o755)
    topology = build(backend="ray", hosts=["a", "b"], head=None,
                     addresses={"a": "10.0.0.1", "b": "10.0.0.2"},
                     args={"tensor-parallel-size": 8, "pipeline-parallel-size": 2},
                     gpus_per_node=8, ray_port=6379, master_port=29501, ray_args=[],
                     engine=engine("vllm"))
    head_node = cast(ServiceStep, RayUnit("process", paths))  # no pidfile: dead
    with connect("a", Inventory(hosts={"a": HostSpec(connection="local")})) as transport, \
            pytest.raises(ClusterError) as raised:
        wait_for_ray(transport, topology, str(bin_dir), timeout=600, gpus=16,
                     head_node=head_node, sleep=lambda _: None)
    assert raised.value.message == (
        f"the head's Ray node (unit c-ray) died before the cluster formed; its log: {PORT_TAKEN}")
    assert not asked.exists()  # `ray status` was never run
