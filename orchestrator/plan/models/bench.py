"""The plan's `bench:`: the sweep, its workload, objectives, telemetry."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from orchestrator.metrics import DEFAULT_PERCENTILES
from orchestrator.plan.meaning import CONTROLLER_PATH
from orchestrator.plan.models.base import Duration, FieldError, StrictModel
from orchestrator.plan.source import kind_of


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


# Requests in flight at once: each is a connection and a task on this machine, and 65,536
# is past what one controller's sockets hold; a larger level is a typo (1e6 for 1e3).
MAX_CONCURRENCY = 65536


class AutoSweep(StrictModel):
    """The search for the concurrency where throughput stops growing (`concurrency: auto`)."""

    threshold: float = Field(
        0.05, gt=0, lt=1, description="Stop when output throughput grows less than this fraction."
    )
    start: int = Field(1, ge=1, le=MAX_CONCURRENCY, description="First concurrency level.")
    max_concurrency: int = Field(1024, ge=1, le=MAX_CONCURRENCY,
                                 description="Upper bound of the search.")
    resolution: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Narrowing stops when the knee is bracketed within this fraction of it.",
    )


# Client processes of one sweep: each a core's worth of load generator; more than a
# controller's cores only share them.
MAX_CLIENT_PROCESSES = 64


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
        description="Concurrency levels (each 1 to 65,536), or `auto` to search for the knee.",
    )
    rate: list[float] = Field(
        default_factory=list, description="Request rates (req/s) for open-loop levels."
    )
    arrivals: Literal["poisson", "constant"] = Field("poisson", description="Open-loop arrivals.")
    burstiness: float = Field(1.0, gt=0, description="Gamma shape; 1 = Poisson.")
    max_in_flight: int | None = Field(
        None, ge=1, le=MAX_CONCURRENCY,
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
        description="The longest wait between scrapes of the server's /metrics during a level "
                    "(a level gets 10 at least: short levels are scraped oftener); null turns it off.",
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
    client_processes: int = Field(
        1, ge=1, le=MAX_CLIENT_PROCESSES,
        description="Load generator processes: each level's concurrency (or request rate) and "
                    "requests are split across them, for loads one client core cannot drive; "
                    "the level's figures are computed over all their requests together. Each "
                    "closed or batch level (and `max_in_flight`) needs at least one request in "
                    "flight per process.",
    )

    @field_validator("concurrency", mode="before")
    @classmethod
    def _levels(cls, value: Any) -> Any:
        """Each level an integer from 1 to MAX_CONCURRENCY, named by its place in the list."""
        if not isinstance(value, list):
            return value
        if not value:
            raise ValueError("give at least one concurrency level, or `auto`")
        for index, level in enumerate(value):
            if not isinstance(level, int) or isinstance(level, bool):
                raise FieldError(f"a concurrency level is a whole number such as 64, got "
                                 f"{kind_of(level)}", at=(index,))
            if level < 1:
                raise FieldError(f"concurrency levels must be at least 1, got {level}", at=(index,))
            if level > MAX_CONCURRENCY:
                raise FieldError(f"a concurrency level is at most {MAX_CONCURRENCY:,} requests "
                                 f"in flight, got {level:,}", at=(index,))
        return value

    @model_validator(mode="after")
    def _processes(self) -> Bench:
        """Every client process holds at least one of a level's requests in flight."""
        processes = self.client_processes
        lowest = {"max_in_flight": self.max_in_flight}
        if self.concurrency == "auto":
            lowest["auto.start"] = self.auto.start
        elif "concurrency" in self.model_fields_set or not self.rate:  # levels that run
            lowest["the lowest concurrency level"] = min(self.concurrency)
        for name, low in lowest.items():
            if low is not None and low < processes:
                raise FieldError(
                    f"{processes} client processes need at least {processes} requests in flight, "
                    f"but {name} is {low}: use at most {low}, or higher levels (each "
                    "process holds at least one request)", at=("client_processes",))
        return self

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


