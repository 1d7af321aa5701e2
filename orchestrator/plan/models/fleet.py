"""A fleet: several replicas of the plan's service behind vLLM's router (`vllm-router`).

`replicas:` says how many servers the plan's hosts run (one per host, or several per host on
disjoint GPU sets); `router:` says where the router runs and how it routes. The derivation
of each replica (its name, port, GPUs) is `plan/replicas.py`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from orchestrator.plan.models.base import (
    FieldError,
    HostAddress,
    ServiceName,
    StrictModel,
    flag_names,
)
from orchestrator.plan.models.service import ArgValue

ROUTER_VERSION = "0.1.17"  # the vllm-router release orch's flag table was read from
POLICIES = ("random", "round_robin", "cache_aware", "kv_aware", "power_of_two",
            "consistent_hash", "sticky_least_loaded")  # `vllm-router --help`, --policy


class Replicas(StrictModel):
    """How many servers the plan's hosts run, and how they share a host's GPUs."""

    per_host: int = Field(1, ge=1, le=16, description="Replicas on each host of `hosts`; "
                          "more than one needs `gpus` (each replica its own GPU set).")
    gpus: int | None = Field(None, ge=1, le=64, description="GPUs per replica: replica i of a "
                             "host gets CUDA_VISIBLE_DEVICES i*gpus .. (i+1)*gpus-1; preflight "
                             "checks the host has per_host x gpus.")
    port_step: int = Field(1, ge=1, le=1000, description="Replica i of a host listens on "
                           "`service.port + i * port_step`.")
    min_ready: int | None = Field(None, ge=1, description="The router starts, and the apply "
                                  "succeeds (degraded), once this many replicas serve; "
                                  "default: all of them.")
    max_unavailable: int = Field(1, ge=1, description="A rolling redeploy takes at most this "
                                 "many replicas out of the router at once.")
    prefill: int | None = Field(None, ge=1, description="`router.mode: pd`: the first N "
                                "replicas serve prefill, the others decode.")

    @model_validator(mode="after")
    def _gpu_sets(self) -> Replicas:
        if self.per_host > 1 and self.gpus is None:
            raise FieldError("several replicas on one host need `gpus:` (each its own GPU "
                             "set, e.g. gpus: 4 for two replicas on an 8-GPU host)",
                             at=("gpus",))
        return self


def _router_flags(value: dict[str, ArgValue]) -> dict[str, ArgValue]:
    # vllm-router's flags hold no `_` or `.` (its --help)
    return flag_names(value, r"[a-z0-9][a-z0-9-]*", "retry-max-retries")


class Router(StrictModel):
    """vLLM's router in front of the replicas: installed in its own venv, supervised like a
    service (systemd or process)."""

    version: str = Field(ROUTER_VERSION, description="The pinned `vllm-router` release.")
    on: str = Field("controller", description="Where it runs: `controller` (this machine) or "
                    "a host name of the inventory.")
    host: HostAddress = Field("127.0.0.1", description="Address it listens on (`--host`).")
    port: int = Field(30000, ge=1, le=65535, description="Its port (`--port`).")
    metrics_port: int = Field(29000, ge=1, le=65535, description="Its Prometheus port "
                              "(`--prometheus-port`).")
    policy: Literal["random", "round_robin", "cache_aware", "kv_aware", "power_of_two",
                    "consistent_hash", "sticky_least_loaded"] = Field(
        "round_robin", description="How it picks a replica (`--policy`).")
    mode: Literal["regular", "pd"] = Field(
        "regular", description="`pd`: prefill/decode disaggregation (`--vllm-pd-"
                               "disaggregation`); the replicas split by `replicas.prefill`.")
    venv: str | None = Field(None, description="Its venv; default "
                             "`~/.cache/orch/router/<version>` where it runs.")
    name: ServiceName = Field("orch-router", description="Its service name (unit, pidfile, folder).")
    args: Annotated[dict[str, ArgValue], AfterValidator(_router_flags)] = Field(
        default_factory=dict, description="Other `vllm-router` flags by long name without "
        "dashes (e.g. `retry-max-retries: 3`), checked against its own --help.")

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not re.fullmatch(r"\d+(\.\d+){1,3}([a-z0-9.+-]*)", value):
            raise ValueError(f"expected a release such as {ROUTER_VERSION}, got {value!r}")
        return value

    @field_validator("on")
    @classmethod
    def _where(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", value):
            raise ValueError("expected `controller` or an inventory host name")
        return value

