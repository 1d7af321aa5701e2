"""The plan itself: every section, `env:`, `commands:`, `collect:`."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.names import check_name
from orchestrator.plan.meaning import HOST_VARS, makes_step
from orchestrator.plan.models.base import Duration, FieldError, StrictModel, host_path
from orchestrator.plan.models.bench import Bench
from orchestrator.plan.models.fleet import Replicas, Router
from orchestrator.plan.models.install import FileSpec, Install, PythonEnv
from orchestrator.plan.models.matrix import Matrix
from orchestrator.plan.models.model import ModelSpec, service_defaults
from orchestrator.plan.models.service import Health, ServiceSpec
from orchestrator.plan.models.smoke import SmokeCheck
from orchestrator.plan.models.tune import Tune


def environment(value: dict[str, str]) -> dict[str, str]:
    """Environment variables: valid names, single-line values."""
    for key, item in value.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"{key!r} is not a valid environment variable name")
        if "\n" in item or "\r" in item:
            raise FieldError("an environment value cannot hold a line break", at=(key,))
    return value


class CommandSpec(StrictModel):
    """A command no other section covers (fetch weights, check the driver, set a sysctl),
    guarded so that a converged host does not run it again."""

    name: str = Field(description="Short name: the output goes to `commands/<name>.log`.")
    run: list[str] | None = Field(
        None, description="The command as an argv list; each word reaches the host quoted.")
    shell: str | None = Field(
        None, description="Instead of `run`: a shell script, run by `sh -c` (pipes, `&&`).")
    creates: str | None = Field(
        None, description="Guard: skip the command when this path exists on the host.")
    unless: list[str] | None = Field(
        None, description="Guard: skip the command when this argv exits 0 (run by the probe, "
                          "in `orch plan` too: it must change nothing).")
    when: Literal["before_install", "before_launch"] = Field(
        "before_launch", description="Before the venv is converged, or before the service starts.")
    timeout: Duration = Field(600.0, gt=0, description="Give up (and fail the apply) after this long.")
    restarts_service: bool = Field(
        False, description="When it runs, restart the service (weights or config it changed).")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment of the command; may hold secrets (`${env:HF_TOKEN}`), which "
                    "reach it on stdin, never on a command line.")

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return environment(value)

    @field_validator("name")
    @classmethod
    def _short_name(cls, value: str) -> str:
        return check_name(value, "a short name (it names a log file)", max_length=64)

    @field_validator("creates")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        return None if value is None else host_path(value, host_refs=True)

    @field_validator("run", "unless")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an argv needs at least the program, e.g. [nvidia-smi]")
        return value

    @model_validator(mode="after")
    def _one_command(self) -> CommandSpec:
        if (self.run is None) == (self.shell is None):
            raise ValueError("give the command as `run:` (an argv list) or as `shell:` (a "
                             "script for sh -c), one of the two")
        return self


class CollectItem(StrictModel):
    """A remote file copied into the run folder after the run."""

    path: str = Field(description="Remote file to copy into the run folder.")
    optional: bool = Field(True, description="A missing file is not an error.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return host_path(value)


class Plan(StrictModel):
    """A deployment plan: what to install, configure, launch, check and measure."""

    name: str = Field(description="Plan name; names the run folder `runs/<name>/`.")
    description: str = Field("", description="One line for humans.")
    extends: str | list[str] | None = Field(
        None, description="Base plan file(s), relative to this file, merged underneath it."
    )
    hosts: str | list[str] = Field(
        "localhost", description="An inventory group, or a list of host names."
    )
    vars: dict[str, Any] = Field(
        default_factory=dict, description="Values for `${vars.NAME}` references."
    )
    python: Annotated[PythonEnv | None, makes_step("python")] = Field(
        None, description="The Python environment.")
    install: Annotated[Install, makes_step("python")] = Field(
        default_factory=Install, description="Package pins.")
    model: Annotated[ModelSpec | None, makes_step("model")] = Field(
        None, description="The model's weights, fetched and verified on each host before the "
                          "service starts; `service.model` may then be left out "
                          "(docs/plans.md, Model weights).")
    files: Annotated[list[FileSpec], HOST_VARS, makes_step("files")] = Field(
        default_factory=list, description="Configuration files.")
    env: Annotated[dict[str, str], HOST_VARS, makes_step("service")] = Field(
        default_factory=dict,
        description="Service environment. Values may be secret references `${env:NAME}`.",
    )
    service: Annotated[ServiceSpec | None, makes_step("service")] = Field(
        None, description="The model server.")
    health: Annotated[Health, makes_step("service")] = Field(
        default_factory=Health, description="Waiting for readiness.")
    smoke: list[SmokeCheck] = Field(default_factory=list, description="Checks after start-up.")
    bench: Bench | None = Field(None, description="Benchmark sweeps.")
    collect: list[CollectItem] = Field(
        default_factory=list, description="Extra remote files copied into the run folder."
    )
    commands: Annotated[list[CommandSpec], HOST_VARS, makes_step("commands")] = Field(
        default_factory=list, description="Guarded commands, before install or before launch.")
    replicas: Replicas | None = Field(
        None, description="Several servers of this service: one per host of `hosts`, or "
                          "several per host on disjoint GPU sets (docs/fleet.md).")
    router: Router | None = Field(
        None, description="vLLM's router in front of the replicas: its release, where it "
                          "runs, port, policy and flags (docs/fleet.md).")
    matrix: Matrix | None = Field(
        None, description="Variants of this plan: axes (a plan path in --set syntax, with the "
                          "list of values it takes) and optional include, exclude and "
                          "objective; each variant is applied and benchmarked as its own run "
                          "(docs/plans.md, Matrix sweeps).")
    tune: Tune | None = Field(
        None, description="What `orch tune` searches: axes (a plan path in --set syntax, with "
                          "a list of values or a range {low, high, step | log}) and optional "
                          "slo and objective defaults (docs/tune.md).")

    @model_validator(mode="before")
    @classmethod
    def _model_serves(cls, data: Any) -> Any:
        return service_defaults(data)

    @field_validator("commands")
    @classmethod
    def _unique_commands(cls, value: list[CommandSpec]) -> list[CommandSpec]:
        seen: set[str] = set()
        for index, command in enumerate(value):
            if command.name in seen:
                raise FieldError(f"two commands are named {command.name!r}; each names its "
                                 "own log file", at=(index, "name"))
            seen.add(command.name)
        return value

    @field_validator("smoke", "collect")
    @classmethod
    def _unique_files(cls, value: list[Any], info: ValidationInfo) -> list[Any]:
        """Each check and collected path has a file of its own in the run folder."""
        key = "name" if info.field_name == "smoke" else "path"
        seen: set[str] = set()
        for index, item in enumerate(value):
            if getattr(item, key) in seen:
                raise FieldError(f"{getattr(item, key)!r} is given twice; each has a file of its "
                                 "own in the run folder", at=(index, key))
            seen.add(getattr(item, key))
        return value

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        return check_name(value, "a plan name (it names the run folder)")

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        return environment(value)

    @model_validator(mode="after")
    def _no_nul(self) -> Plan:
        """No value may hold a NUL byte: no command line, file name or environment can."""
        where = _nul_at(self.model_dump(mode="python"), ())
        if where is not None:
            raise FieldError("a NUL byte (\\0) cannot reach a host", at=where)
        return self

    @model_validator(mode="after")
    def _model_needs_python(self) -> Plan:
        if self.model is not None and self.python is None:
            raise FieldError("model: needs a `python:` section (the venv whose huggingface_hub "
                             "fetches it)", at=("model",))
        return self

    @model_validator(mode="after")
    def _fleet(self) -> Plan:
        if self.router is None:
            if self.replicas is not None and self.replicas.prefill is not None:
                raise FieldError("replicas.prefill needs `router: {mode: pd}`",
                                 at=("replicas", "prefill"))
            return self
        if self.service is None:
            raise FieldError("router: needs a `service:` (the replicas it routes to)",
                             at=("router",))
        if self.service.nodes is not None:
            raise FieldError("router: routes to replicas, each one server; service.nodes (one "
                             "server across hosts) cannot be a replica here", at=("router",))
        if self.service.api_key is not None:
            raise FieldError("the router gives its workers a key only on its command line, "
                             "which orch never writes: a fleet's replicas take no API key",
                             at=("service", "api_key"))
        if self.router.mode == "pd" and (self.replicas is None or self.replicas.prefill is None):
            raise FieldError("router.mode: pd needs `replicas.prefill: N` (how many replicas "
                             "serve prefill; the others decode)", at=("router", "mode"))
        return self

    @model_validator(mode="after")
    def _install_needs_python(self) -> Plan:
        if self.install.packages and self.python is None:
            raise FieldError(
                "install.packages needs a `python:` section (where to install)",
                at=("install", "packages"),
            )
        return self


def _nul_at(value: Any, at: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(value, str):
        return at if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _nul_at(str(key), (*at, str(key))) or _nul_at(item, (*at, str(key)))
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _nul_at(item, (*at, index))
            if found is not None:
                return found
    return None
