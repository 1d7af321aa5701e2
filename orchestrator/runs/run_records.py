"""The records a run folder holds, typed (pydantic, like the plan).

The writer validates each record before it writes it, and the reader returns these types:
a field read back is the field written, and a file from an older or newer orch still reads
(unknown keys are kept, missing optional ones take their defaults). Benchmark level results
keep `vllm bench serve`'s keys and order; their core figures are typed here, the per-metric
statistics (`p99_ttft_ms`, `std_itl_ms`, ...) stay as extra keys (`figure()` reads any).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    model_serializer,
    model_validator,
)


class Record(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Meta(Record):
    """meta.json: what ran, when, and how it ended (`incomplete` until it ends)."""

    orch_version: str = ""
    plan: str = ""
    plan_digest: str = ""
    command: str = "apply"
    hosts: list[str] = Field(default_factory=list)
    started: str | None = None
    finished: str | None = None
    duration_s: float | None = None
    status: str = "incomplete"
    plan_file: str | None = None
    layers: list[str] = Field(default_factory=list)
    engine: str | None = None
    simulated: bool | None = None
    locked_from: str | None = None
    resumed: list[str] = Field(default_factory=list)  # when `--resume` continued it
    # Where it failed, host by host: the host, the step or stage, the error's first line.
    failures: list[dict[str, str]] = Field(default_factory=list)


class FindingRecord(Record):
    level: str
    message: str
    fix: str = ""


class StepRecord(Record):
    """One step or stage of one host."""

    step: str
    status: str  # ok, changed, pending, failed, skipped
    changes: list[str] = Field(default_factory=list)
    findings: list[FindingRecord] = Field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


class HostSteps(Record):
    """steps.json: a host's whole run."""

    host: str
    error: str | None = None
    round_trips: int = 0
    seconds: float = 0.0
    steps: list[StepRecord] = Field(default_factory=list)
    service_url: str | None = None
    startup_s: float | None = None
    bench_dir: str | None = None


class HostFactsRecord(Record):
    """facts.json: the host as the probe found it."""

    host: dict[str, Any] = Field(default_factory=dict)
    probe_seconds: float = 0.0
    record_files: dict[str, int] = Field(default_factory=dict)  # RECORD files checked, hashed
    transport: dict[str, str] | None = None  # {"name": "openssh", "why": "auto: ..."}


class StartupPhase(Record):
    """One start-up phase as an engine's log reader tracked it: times in seconds since launch,
    `duration_s` by the controller's clock, `engine_seconds` as the engine printed it (read
    from `vllm_seconds` too, the name before 2026-12); the phase's own figures (KV-cache
    tokens, ...) stay extra keys."""

    phase: str
    label: str = ""
    start_s: float | None = None
    end_s: float | None = None
    duration_s: float | None = None
    engine_seconds: float | None = Field(
        default=None, validation_alias=AliasChoices("engine_seconds", "vllm_seconds"))


class Startup(Record):
    """startup.json: how the service became ready (in the run folder, and beside the
    service on its host, where the next `orch plan` reads what a restart costs)."""

    url: str | None = None
    already_running: bool = False
    seconds: float | None = None
    restarts: int = 0
    # `warm`: the compile cache of the launch's key was there before it and the engine read
    # it; `cold` otherwise; None: not started by this run, or an engine without one.
    start: Literal["cold", "warm"] | None = None
    # Its root, whether it was filled before the launch, what the log said of the graphs.
    compile_cache: dict[str, Any] | None = None
    phases: list[StartupPhase] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)

    def took(self) -> str:
        """The phases that took time, as one line: `weights 17.0s, compile 3.1s`."""
        return ", ".join(f"{p.phase} {p.duration_s:.1f}s" for p in self.phases
                         if p.duration_s and p.phase != "ready")


class DiagnosisRecord(Record):
    """One entry of diagnosis.json."""

    key: str
    level: str
    cause: str
    fix: str
    evidence_line: str
    related_lines: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)


class OrderedRecord(Record):
    """A record written back in the key order it was made or read with (typed and extra
    keys alike), so a file read and written again is the same file byte for byte."""

    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: Any) -> Any:
        made = handler(data)
        if isinstance(data, Mapping):
            made._order = list(data)
        return made

    @model_serializer(mode="wrap")
    def _in_order(self, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        first = [key for key in self._order if key in out]
        return {**{key: out[key] for key in first}, **out}


class RepeatResult(OrderedRecord):
    """One entry of a level's `repeats`: the repeat's own headline figures, then each
    sampler's `repeat_keys` (extra keys: `server_output_throughput`, `energy_j`, ...), then
    why it stopped early, if it did."""

    duration: float | None = None
    completed: int = 0
    failed: int = 0
    output_throughput: float | None = None
    mean_ttft_ms: float | None = None
    mean_e2el_ms: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    stopped: str | None = None


class LevelResult(OrderedRecord):
    """level-<label>.json: one load level (`vllm bench serve`'s result keys, and orch's).

    One object from birth (`bench/level.compose`) to the writer, the reader and the report.
    The figures code reads are typed; the per-metric statistics (`p99_ttft_ms`,
    `std_itl_ms`, ...) and blocks only some levels have stay extra keys (`figure()` reads
    any number, `extra()` any block); its `repeats` are `RepeatResult`s. Written in the
    key order it was made or read with (an `OrderedRecord`): a level file of an older orch
    reads and writes back byte for byte."""

    level: str = ""
    mode: str = "closed"  # closed, batch, rate
    max_concurrency: int | None = None
    request_rate: float | str | None = None  # "inf" for closed and batch levels
    model_id: str | None = None
    endpoint_type: str | None = None
    completed: int = 0
    failed: int = 0
    partial: bool = False
    stopped: str | None = None
    duration: float | None = None
    output_throughput: float | None = None
    request_goodput: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    mean_ttft_ms: float | None = None
    mean_itl_ms: float | None = None
    total_output_tokens: int | None = None
    max_generating: int | None = None  # most requests generating at once (client side)
    spread: float | None = None  # of the repeats' throughputs: (max - min) / mean
    client_cpu_utilization: float | None = None
    prompt_prefix: str | None = None
    keep_alive: bool | None = None
    token_source: str | None = None
    retried: int | None = None
    error_messages: list[dict[str, Any]] = Field(default_factory=list)
    repeats: list[RepeatResult] = Field(default_factory=list)
    server_metrics: dict[str, Any] | None = None  # the /metrics sampler's block
    # C asked against what ran: the client's in-flight peak, the server's running/waiting
    effective_concurrency: dict[str, float | int | None] | None = None
    flags: list[str] = Field(default_factory=list)
    # What held the level (limits/verdicts.py: name, confidence, why, figures); None in a
    # level file of an orch before verdicts: the reader judges it then.
    limiter: dict[str, Any] | None = None
    simulated: bool = False
    time_scale: float | None = None
    normalized: dict[str, float] | None = None  # figures in the simulator's model time
    metric_definitions: dict[str, str] | None = None

    def figure(self, name: str, *, model_time: bool = True) -> float | None:
        """A numeric figure by its result key (`p99_ttft_ms`, `output_throughput`, ...),
        in model time when the level has it and `model_time` asks for it."""
        if model_time and self.normalized and name in self.normalized:
            return self.normalized[name]
        value = getattr(self, name, None) if name in type(self).model_fields else \
            (self.model_extra or {}).get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def extra(self, name: str) -> Any:
        """A key the model does not type (a block such as `finish_reasons`, a sampler's)."""
        return (self.model_extra or {}).get(name)

    def names(self) -> list[str]:
        """Every key the level holds, typed and extra."""
        return [*type(self).model_fields, *(self.model_extra or {})]


class RequestRow(Record):
    """One line of requests-<label>.jsonl: one request of a level (the figures a report
    reads are typed; the rest, every ITL included, stay as extra keys)."""

    level: str = ""
    request_id: str = ""
    warmup: bool = False
    ok: bool = True
    error_kind: str | None = None
    ttft_ms: float | None = None
    e2el_ms: float | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None


class SweepSummary(Record):
    """summary.json: the sweep as a whole."""

    base_url: str | None = None
    model: str | None = None
    server_version: str | None = None
    simulated: bool = False
    simulator_profile: str | None = None
    time_scale: float | None = None
    started: str | None = None
    finished: str | None = None
    stopped: str | None = None
    # The server's death during the sweep: the level it ended ("level"), its diagnosed
    # "cause" (or none known), and whether it was "relaunched" and the sweep went on.
    crash: dict[str, Any] | None = None
    knee: int | None = None
    knee_reason: str | None = None
    # Where the sweep stops rising, what held it there and what to try (limits/verdicts.py)
    plateau: dict[str, Any] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)  # the Bench settings it ran with
    levels: list[dict[str, Any]] = Field(default_factory=list)  # the CSV rows
    anomalies: dict[str, list[str]] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
