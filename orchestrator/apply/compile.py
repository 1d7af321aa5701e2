"""Compile a loaded plan into what runs on each host: its steps and the service's launch spec.

The one place plan values are turned into host work, for `orch validate` (no secrets: their
references stand in) and `orch plan|apply|restart` alike, so an error apply would meet
(a flag given twice, a secret on a command line, an unreadable template) is found by
validate too, located at the file and line that set it. No connection is made here.

It sits above the steps and the service it builds (they are imported here, and the plan's
models below never import this module).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import yaml
from pydantic import ValidationError

from orchestrator.apply.install_gate import INSTALL_RECORD, InstallGate, install_digest
from orchestrator.errors import PlanError
from orchestrator.inventory import Inventory
from orchestrator.plan.host_vars import Placeholders, substitute_host, uses_host_vars
from orchestrator.plan.loader import LoadedPlan, locate
from orchestrator.plan.models import Install, Plan
from orchestrator.plan.replicas import Replica, replica_plan
from orchestrator.plan.secrets import secret_names, substitute
from orchestrator.plan.validation import Positions, Problem, as_plan_error, validate
from orchestrator.plan.variables import render_vars
from orchestrator.steps.base import Step
from orchestrator.steps.commands import CommandsStep
from orchestrator.steps.files import DesiredFile, FilesStep, read_template, render_files
from orchestrator.steps.python_env import PythonEnvStep

if TYPE_CHECKING:
    from orchestrator.cluster.gate import Gate
    from orchestrator.service.step import ServiceStep

# The engines and a multi-node server's gate are imported where a plan with a service uses
# them: a plan without one (a no-op re-apply of packages and files) never loads them.


@dataclass(frozen=True)
class Options:
    """How the steps are built: what the command asks of them."""

    with_service: bool = True  # build the service step (not with `--skip service`)
    force_restart: bool = False  # `orch restart`
    verify_all: bool = False  # hash every RECORD file
    freeze: Mapping[str, Sequence[str]] | None = None  # --locked: host -> its frozen set
    commits: Mapping[str, str] | None = None  # --locked: host -> the model's commit it had
    replicas: Mapping[str, Replica] | None = None  # a fleet: each host name is a replica's


@dataclass
class Compiled:
    plan: Plan
    steps: dict[str, list[Step]] = field(default_factory=dict)  # host -> its steps, in order
    plans: dict[str, Plan] = field(default_factory=dict)  # host -> the plan, its variables filled
    installs: dict[str, InstallGate] = field(default_factory=dict)  # host -> its install digest
    gate: Gate | None = None  # a multi-node server: its nodes vote and start in order here

    def service_step(self, host: str) -> ServiceStep | None:
        """The step of the server this host answers for (None on a worker node)."""
        if self.gate is not None and self.gate.topology.node(host).role == "worker":
            return None
        return next((cast("ServiceStep", s) for s in self.steps.get(host, [])
                     if s.name == "service"), None)

    def unit_steps(self, host: str) -> list[ServiceStep]:
        """Every supervised process of the host (the server, a Ray node: service steps, by
        construction below): their logs."""
        return [cast("ServiceStep", s) for s in self.steps.get(host, [])
                if s.name in ("service", "ray")]


def placeholders(plan: Plan) -> dict[str, str]:
    """Stand-ins for the secrets when only checking (`orch validate`): the references stay
    visible where a value would go."""
    return {name: f"${{env:{name}}}" for name in secret_names(plan)}


def compile_plan(
    loaded: LoadedPlan, secrets: Mapping[str, str], hosts: Sequence[str],
    options: Options = Options(), inventory: Inventory | None = None,
) -> Compiled:
    """Every host's steps; any PlanError is located in the plan's layers. `${host.X}` are
    filled from `inventory` (without one, as for `orch validate`, they stay references)."""
    try:
        compiled = Compiled(loaded.plan)
        if options.with_service:
            _engine_check(loaded)
        values = {host: inventory.host_values(host) if inventory is not None else Placeholders()
                  for host in hosts}
        for host in hosts:
            compiled.plans[host] = plan_for_host(loaded, host, values[host])
            if options.replicas is not None:  # a fleet: its name, port, GPUs
                compiled.plans[host] = replica_plan(compiled.plans[host], options.replicas[host])
        service = loaded.plan.service
        if service is not None and service.nodes is not None and options.with_service:
            compiled.gate = _gate(compiled.plans, list(hosts), know_hosts=inventory is not None)
        for host in hosts:
            compiled.steps[host], gate = _host_steps(loaded, compiled.plans[host], secrets, host,
                                                     values[host], options, compiled.gate)
            if gate is not None:
                compiled.installs[host] = gate
        return compiled
    except PlanError as error:
        raise locate(error, loaded) from None


def _engine_check(loaded: LoadedPlan) -> None:
    """The engine's own rules of the plan alone (vLLM: its flags against the pinned release),
    before any host is asked: every problem at its file and line."""
    service = loaded.plan.service
    if service is None and loaded.plan.router is None:
        return
    from orchestrator.engines import engine

    found = engine(service.engine).plan_check(loaded.plan) if service is not None else []
    if loaded.plan.router is not None:  # the fleet's router: its flags against its --help
        found += engine("router").plan_check(loaded.plan)
    if found:
        positions = loaded.positions or Positions(keys={}, values={}, texts={})
        raise as_plan_error([Problem(p.path, p.message, positions.locate(
            p.path, key=p.path[:2] in (("service", "args"), ("router", "args"))),
            hint=p.hint) for p in found], positions)


def plan_for_host(loaded: LoadedPlan, host: str, values: Mapping[str, Any]) -> Plan:
    """The plan as `host` gets it: `${host.X}` filled from its inventory variables, then
    validated as the loader validates (every problem, located, with its fix)."""
    plan = loaded.plan
    data = plan.model_dump(mode="python")
    if not uses_host_vars(data):
        return plan
    filled = substitute_host(data, values, host)
    try:
        return validate(Plan, filled, loaded.positions or Positions(keys={}, values={}, texts={}))
    except PlanError as error:
        error.message = f"for host {host}, after filling in its variables: {error.message}"
        raise


def check(loaded: LoadedPlan) -> None:
    """What `orch validate` runs: the compile apply would do, without secrets or hosts."""
    compile_plan(loaded, placeholders(loaded.plan), ["<validate>"])


def _gate(plans: Mapping[str, Plan], hosts: list[str], *, know_hosts: bool) -> Gate:
    """The topology of a multi-node server and the gate its nodes meet at."""
    from orchestrator.cluster.gate import Gate
    from orchestrator.cluster.topology import build as build_topology
    from orchestrator.engines import engine

    first = plans[hosts[0]]
    assert first.service is not None and first.service.nodes is not None
    nodes = first.service.nodes
    addresses, ray_args = {}, {}
    for host in hosts:  # what may hold `${host.X}`: each host's own
        service = plans[host].service
        assert service is not None and service.nodes is not None
        addresses[host] = service.nodes.address
        ray_args[host] = service.nodes.ray_args
    topology = build_topology(
        backend=nodes.backend, hosts=hosts, head=nodes.head, addresses=addresses,
        args=first.service.args, extra_args=first.service.extra_args, gpus_per_node=nodes.gpus, ray_port=nodes.ray_port,
        master_port=nodes.master_port, ray_args=ray_args, know_hosts=know_hosts,
        engine=engine(first.service.engine))
    return Gate(topology, check_gpus=engine(first.service.engine).uses_gpus)


def _host_steps(loaded: LoadedPlan, plan: Plan, secrets: Mapping[str, str], host: str,
                values: Mapping[str, Any], options: Options,
                gate: Gate | None = None) -> tuple[list[Step], InstallGate | None]:
    """The host's steps, and its install digest (None without a venv to keep it in)."""
    steps: list[Step] = []
    installed: InstallGate | None = None
    marker = None
    if plan.service is not None and plan.python is not None:
        from orchestrator.service.backends import ServicePaths  # start-up time, as below

        marker = ServicePaths.for_venv(plan.python.venv, plan.service.name).restart_marker
    early = [c for c in plan.commands if c.when == "before_install"]
    if early:
        steps.append(CommandsStep("prepare", early, secrets=secrets, restart_marker=marker))
    install = _install(plan, host, options)
    if plan.python is not None:
        steps.append(PythonEnvStep(plan.python, install, exact=install is not plan.install,
                                   verify_all=options.verify_all))
    commit = options.commits.get(host) if options.commits is not None else None
    if plan.model is not None:
        steps.append(_model_step(plan, secrets, marker, commit))
    files: list[DesiredFile] = []
    if plan.files:
        files = render_files(
            plan.files, base_dir=loaded.base_dir,
            render_template=lambda text: substitute_host(
                render_vars(text, plan.vars), values, host, ("files",)),
            fill_secrets=lambda text: substitute(text, secrets))
        steps.append(FilesStep(files))
    if plan.python is not None and not options.verify_all:  # --verify-all: the install in full
        installed = InstallGate(install_digest(plan.python, install, plan.model,
                                               {f.path: f.sha256 for f in files}, commit),
                                f"{plan.python.venv.rstrip('/')}/{INSTALL_RECORD}")
    late = [c for c in plan.commands if c.when == "before_launch"]
    if late:
        steps.append(CommandsStep("commands", late, secrets=secrets, restart_marker=marker))
    if plan.service is not None and options.with_service:
        steps += _service_steps(plan, secrets, host, options, gate,
                                {f.path: f.sha256 for f in files})
    return steps, installed


def _service_steps(plan: Plan, secrets: Mapping[str, str], host: str, options: Options,
                   gate: Gate | None, digests: dict[str, str]) -> list[Step]:
    """The service's steps: orch's wheel for the simulator, then the unit (or a cluster
    member's units)."""
    # Imported here: a plan without a service does not pay for them (start-up time).
    from orchestrator.engines import engine
    from orchestrator.service.launch import render_launch
    from orchestrator.service.orch_wheel import OrchWheelStep
    from orchestrator.service.step import ServiceStep

    assert plan.service is not None  # the caller checked
    if plan.python is None:
        raise PlanError("service: needs a `python:` section (the venv that runs the server)",
                        field="python")
    steps: list[Step] = []
    if engine(plan.service.engine).simulated:  # `orch sim serve` runs from the venv
        steps.append(OrchWheelStep(plan.python))
    spec = render_launch(plan, venv_bin=f"{plan.python.venv}/bin")
    if gate is not None:
        from orchestrator.cluster.units import member_steps

        return [*steps, *member_steps(plan, spec, secrets, gate, host, digests,
                                      options.force_restart)]
    steps.append(ServiceStep(plan, spec, secrets, force_restart=options.force_restart,
                             file_digests=digests))
    return steps


def _install(plan: Plan, host: str, options: Options) -> Install:
    """The packages to install: the plan's, or a locked run's frozen set of the host."""
    freeze = options.freeze.get(host) if options.freeze is not None else None
    if freeze is None:
        return plan.install
    try:
        return Install.model_validate({**plan.install.model_dump(), "packages": list(freeze)})
    except ValidationError as error:  # a freeze.txt edited by hand
        first = error.errors()[0]
        raise PlanError(f"--locked: the run's freeze.txt of {host} is not a package "
                        f"set: {first['msg']}", expected="name==version lines") from None


def _model_step(plan: Plan, secrets: Mapping[str, str], marker: str | None,
                commit: str | None) -> Step:
    # only a plan with a model imports its step (start-up time)
    from orchestrator.steps.model import ModelStep

    assert plan.model is not None and plan.python is not None  # the plan's model says so
    return ModelStep(plan.model, plan.python, secrets, restart_marker=marker, commit=commit)


def resolved_plan_yaml(loaded: LoadedPlan) -> str:
    """The plan as it was applied: layers merged, vars filled, templates inlined, secrets as
    references. Reloading it gives the same plan (used by --locked)."""
    data: dict[str, Any] = loaded.plan.model_dump(mode="json", exclude_none=True)
    data.pop("extends", None)
    for spec in data.get("files", []):
        if "template" in spec:
            template = read_template(loaded.base_dir / spec.pop("template"))
            spec["content"] = render_vars(template, loaded.plan.vars)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
