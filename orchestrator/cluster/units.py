"""The supervised processes of one node of a multi-node server, as service steps."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from orchestrator.cluster.gate import Gate
from orchestrator.cluster.member import Member
from orchestrator.plan.models import Plan
from orchestrator.service.backends import RAY_UNIT, ServicePaths, stop_command
from orchestrator.service.launch import LaunchSpec
from orchestrator.service.step import ServiceStep
from orchestrator.steps.base import Step


def member_steps(plan: Plan, spec: LaunchSpec, secrets: Mapping[str, str], gate: Gate,
                 host: str, file_digests: Mapping[str, str], force_restart: bool) -> list[Step]:
    """Ray: a Ray node on every host, then the server on the head. mp: the server on every
    host (headless on the workers)."""
    assert plan.python is not None and plan.service is not None
    topology = gate.topology
    node = topology.node(host)
    venv_bin = f"{plan.python.venv}/bin"
    pins = tuple(plan.install.pins())
    timeout = plan.service.nodes.join_timeout if plan.service.nodes else 600.0
    server_spec = dataclasses.replace(
        spec, argv=[*spec.argv, *topology.server_flags(node)],
        env={**spec.env, **topology.server_env(node)})
    steps: list[Step] = []
    server_paths = ServicePaths.for_venv(plan.python.venv, plan.service.name)
    if topology.backend == "ray":
        ray_spec = dataclasses.replace(
            spec, engine="ray", model="", argv=topology.ray_node_argv(node, venv_bin),
            env={**spec.env, **topology.node_env(node)}, served_names=[],
            port=topology.ray_port)
        # The head's server goes down before its Ray node (it would die noisily after).
        also_stop = [stop_command("process", server_paths, engine=spec.engine)]
        if plan.service.backend in ("auto", "systemd"):
            also_stop.append(stop_command("systemd", server_paths, engine=spec.engine))
        ray_node = ServiceStep(
            plan, ray_spec, secrets, file_digests=file_digests, force_restart=force_restart,
            unit=RAY_UNIT, member=Member(gate, node, "ray-node", venv_bin, pins, timeout,
                                         also_stop if node.role == "head" else []),
            checks_server=node.role == "head")
        steps.append(ray_node)
        if node.role == "head":
            steps.append(ServiceStep(
                plan, server_spec, secrets, file_digests=file_digests, force_restart=force_restart,
                member=Member(gate, node, "server", venv_bin, pins, timeout,
                              ray_node=ray_node)))
        return steps
    steps.append(ServiceStep(
        plan, server_spec, secrets, file_digests=file_digests, force_restart=force_restart,
        member=Member(gate, node, "server", venv_bin, pins, timeout)))
    return steps
