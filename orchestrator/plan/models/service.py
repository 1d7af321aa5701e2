"""The plan's `service:`: the server to launch, its engine, flags, nodes, restarts, health."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
)

from orchestrator.plan.meaning import HOST_VARS
from orchestrator.plan.models.base import (
    Duration,
    EngineName,
    HostAddress,
    ServiceName,
    StrictModel,
    flag_names,
)


class SimSpec(StrictModel):
    """Settings of the simulator (engine: sim only)."""

    profile: str = Field(
        "kimi-k2.5-nvfp4-8x-rtx-pro-6000", description="Throughput profile of the simulator."
    )
    time_scale: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Multiplier on every model duration: start-up, prefill and decode (0.01 makes a "
            "13-minute start take 8 s). Benchmarks report figures in model time."
        ),
    )
    startup_time_scale: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="Multiplier on the start-up phases only (default: time_scale)."
    )
    vllm_version: str | None = Field(None, description="vLLM version whose wire format to speak.")
    fail_at_startup: str | None = Field(None, description="Inject a start-up failure (testing).")
    crash_after_requests: int | None = Field(None, ge=1, description="Crash after N requests.")
    hang_after_requests: int | None = Field(None, ge=1, description="Hang after N requests.")
    slow_start: float | None = Field(None, ge=0, description="Extra start-up seconds.")
    kv_link_gbps: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="Prefill/decode disaggregation: the "
        "link a decode server pulls the prompt's KV over, in Gbit/s (default 100).")

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        # the simulator's tables only for a plan that names them (start-up time)
        from orchestrator.sim.profiles import PROFILES

        if value not in PROFILES:
            raise ValueError(f"unknown simulator profile {value!r}; one of {', '.join(sorted(PROFILES))}")
        return value

    @field_validator("fail_at_startup")
    @classmethod
    def _known_failure(cls, value: str | None) -> str | None:
        # the simulator's tables only for a plan that names them (start-up time)
        from orchestrator.sim.options import FAILURES

        if value is not None and value not in FAILURES:
            raise ValueError(f"unknown start-up failure {value!r}; one of {', '.join(FAILURES)}")
        return value


class RestartPolicy(StrictModel):
    """Relaunch budget of the model server (orch restarts it, not systemd)."""

    max_restarts: int = Field(
        3, ge=0, description="Relaunches allowed within one apply before a crash loop is reported."
    )


ArgValue = str | int | float | bool | list[str | int | float] | dict[str, Any]


class Nodes(StrictModel):
    """One server on all of the plan's hosts (docs/multinode.md)."""

    backend: Literal["ray", "mp"] = Field(
        "ray", description="`ray`: a Ray cluster and `--distributed-executor-backend ray`; "
        "`mp`: vLLM's own multi-node mode (`--nnodes`, `--node-rank`, `--headless`).")
    head: str | None = Field(
        None, description="The host that runs the API server (rank 0); default: the first host.")
    address: Annotated[str, HOST_VARS] = Field(
        "${host.address}", description="Where the other nodes reach a node: a host variable "
        "such as `${host.cluster_ip}` (default: its inventory address).")
    gpus: int | None = Field(
        None, ge=1, description="GPUs per node; default: what nvidia-smi finds. The simulator "
        "has none: this is how many it declares to Ray.")
    ray_port: int = Field(6379, ge=1, le=65535, description="The Ray head's GCS port.")
    master_port: int = Field(29501, ge=1, le=65535, description="`--master-port` (mp).")
    ray_args: Annotated[list[str], HOST_VARS] = Field(
        default_factory=list, description="More `ray start` arguments on every node, e.g. "
        "`--object-store-memory=...`.")
    join_timeout: Duration = Field(
        600.0, gt=0, description="How long the head waits for every node to join.")


def _vllm_flags(value: dict[str, ArgValue]) -> dict[str, ArgValue]:
    return flag_names(value, r"[a-z0-9][a-z0-9_.-]*", "tensor-parallel-size")


class ServiceSpec(StrictModel):
    """The model server: how it is launched and supervised."""

    engine: EngineName = Field("vllm", description="The server to launch: `vllm serve`, the "
                               "simulator, ... (the registered engines, engines/__init__.py).")
    model: str = Field(description="Model id or local path passed to `vllm serve`.")
    served_model_name: str | list[str] | None = Field(
        None, description="Name(s) clients use; the first is the one responses report."
    )
    host: HostAddress = Field("0.0.0.0", description="Address the server listens on: an IP address "
                      "(`0.0.0.0`, `::`) or a host name.")
    port: int = Field(8000, ge=1, le=65535, description="Port the server listens on.")
    backend: Literal["auto", "systemd", "process"] = Field(
        "auto", description="`systemd` unit, or a supervised `process`; `auto` picks systemd when running."
    )
    name: ServiceName = Field("orch-vllm", description="Service name (systemd unit name, pidfile name).")
    args: Annotated[dict[str, ArgValue], HOST_VARS, AfterValidator(_vllm_flags)] = Field(
        default_factory=dict,
        description=(
            "`vllm serve` flags by long name without dashes, e.g. `tensor-parallel-size: 8`. "
            "`true` renders a bare flag, `false` omits it, lists repeat values, maps render as JSON."
        ),
    )
    extra_args: Annotated[list[str], HOST_VARS] = Field(
        default_factory=list, description="Free-form arguments appended verbatim."
    )
    api_key: str | None = Field(
        None, description="API key the server requires; use a secret reference `${env:NAME}`."
    )

    @field_validator("api_key")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError("an API key cannot hold a line break")
        return value
    sim: SimSpec = Field(default_factory=SimSpec, description="Simulator settings (engine: sim).")
    restart: RestartPolicy = Field(
        default_factory=RestartPolicy, description="How often orch relaunches a dead server."
    )
    nodes: Nodes | None = Field(
        None, description="Serve from all of the plan's hosts as one server (Ray or vLLM's mp).")

    def served_names(self) -> list[str]:
        if self.served_model_name is None:
            return [self.model]
        if isinstance(self.served_model_name, str):
            return [self.served_model_name]
        return list(self.served_model_name)


class Health(StrictModel):
    """How long and how often to wait for the server to become ready."""

    startup_timeout: Duration = Field(1800.0, gt=0, description="Total start-up budget (30m).")
    poll_interval: Duration = Field(2.0, gt=0, description="Time between readiness polls.")
    request_timeout: Duration = Field(60.0, gt=0, description="Timeout of one readiness request.")


