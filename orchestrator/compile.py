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
from typing import Any

import yaml

from orchestrator.errors import PlanError
from orchestrator.plan.loader import LoadedPlan, locate
from orchestrator.plan.models import Install, Plan
from orchestrator.plan.secrets import secret_names, substitute
from orchestrator.plan.variables import render_vars
from orchestrator.steps.base import Step
from orchestrator.steps.files import DesiredFile, FilesStep, render_files
from orchestrator.steps.python_env import PythonEnvStep


@dataclass(frozen=True)
class Options:
    """How the steps are built: what the command asks of them."""

    with_service: bool = True  # build the service step (not with `--skip service`)
    force_restart: bool = False  # `orch restart`
    verify_all: bool = False  # hash every RECORD file
    freeze: Mapping[str, Sequence[str]] | None = None  # --locked: host -> its frozen set


@dataclass
class Compiled:
    plan: Plan
    steps: dict[str, list[Step]] = field(default_factory=dict)  # host -> its steps, in order

    def service_step(self, host: str) -> Step | None:
        return next((s for s in self.steps.get(host, []) if s.name == "service"), None)


def render_text(text: str, plan: Plan, secrets: Mapping[str, str]) -> str:
    """Fill `${vars.X}` (templates) and `${env:X}` (secrets) in text bound for a host."""
    return substitute(render_vars(text, plan.vars), secrets)


def placeholders(plan: Plan) -> dict[str, str]:
    """Stand-ins for the secrets when only checking (`orch validate`): the references stay
    visible where a value would go."""
    return {name: f"${{env:{name}}}" for name in secret_names(plan)}


def compile_plan(
    loaded: LoadedPlan, secrets: Mapping[str, str], hosts: Sequence[str],
    options: Options = Options(),
) -> Compiled:
    """Every host's steps; any PlanError is located in the plan's layers."""
    try:
        return Compiled(loaded.plan, {host: _host_steps(loaded, secrets, host, options)
                                      for host in hosts})
    except PlanError as error:
        raise locate(error, loaded) from None


def check(loaded: LoadedPlan) -> None:
    """What `orch validate` runs: the compile apply would do, without secrets or hosts."""
    compile_plan(loaded, placeholders(loaded.plan), ["<validate>"])


def _host_steps(loaded: LoadedPlan, secrets: Mapping[str, str], host: str,
                options: Options) -> list[Step]:
    plan = loaded.plan
    steps: list[Step] = []
    if plan.python is not None:
        install = plan.install
        freeze = options.freeze.get(host) if options.freeze is not None else None
        if freeze is not None:
            install = Install.model_validate({**plan.install.model_dump(), "packages": list(freeze)})
        steps.append(PythonEnvStep(plan.python, install, exact=freeze is not None,
                                   verify_all=options.verify_all))
    files: list[DesiredFile] = []
    if plan.files:
        files = render_files(plan.files, base_dir=loaded.base_dir,
                             render=lambda text: render_text(text, plan, secrets))
        steps.append(FilesStep(files))
    if plan.service is not None and options.with_service:
        # Imported here: a plan without a service does not pay for them (start-up time).
        from orchestrator.service.launch import render_launch
        from orchestrator.service.step import OrchWheelStep, ServiceStep

        if plan.python is None:
            raise PlanError("service: needs a `python:` section (the venv that runs the server)",
                            field="python")
        if plan.service.engine == "sim":
            steps.append(OrchWheelStep(plan.python))
        spec = render_launch(plan, venv_bin=f"{plan.python.venv}/bin")
        steps.append(ServiceStep(plan, spec, secrets, force_restart=options.force_restart,
                                 file_digests={f.path: f.sha256 for f in files}))
    return steps


def resolved_plan_yaml(loaded: LoadedPlan) -> str:
    """The plan as it was applied: layers merged, vars filled, templates inlined, secrets as
    references. Reloading it gives the same plan (used by --locked)."""
    data: dict[str, Any] = loaded.plan.model_dump(mode="json", exclude_none=True)
    data.pop("extends", None)
    for spec in data.get("files", []):
        if "template" in spec:
            template = (loaded.base_dir / spec.pop("template")).expanduser()
            spec["content"] = render_vars(template.read_text(), loaded.plan.vars)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
