"""The figures a benchmark level reports, as one table: the only place a metric is named.

(Not the server's `/metrics`: that scrape is `bench/server_metrics.py`.)

Each `Metric` says what it is (unit, latency or throughput, how a simulator's time scale
moves it, a one-line definition) and what it may be used for. Everything else is derived
from the table: the plan's choices (`percentile_metrics`, the goodput objectives), the
level file's keys (`mean_<m>_ms`, `p99_<m>_ms`, ...), its `metric_definitions`, its
`normalized` block, sweep.csv's latency columns and the report's percentile tables and
plots. tests/report/test_metric_table.py holds every metric to reaching the CSV, the level
file and the report. How to add one: docs/concepts.md.

Stdlib only and at the bottom of the layers: the plan model imports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["latency", "throughput"]
Plot = Literal["log", "linear"]

# mean, median, std, min and max are always given for a latency; percentiles as chosen
STATS = ("mean", "median", "std", "min", "max")
DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True)
class Metric:
    name: str  # a latency's key stem (`p99_<name>_ms`); a throughput's key itself
    label: str  # short, in table headers: "TTFT"
    title: str  # "Time to first token"
    unit: str  # "ms", "tok/s", "req/s"
    kind: Kind
    # In a simulator's model time (time scale s) a duration is x / s, a rate x * s: the
    # `normalized` block and every comparison of a simulated run move it so.
    scales: bool
    definition: str
    # `vllm bench serve --percentile-metrics` names it: so may the plan (and --percentile-metrics)
    choosable: bool = False
    # ours, computed beside another: its percentiles come when that one's are chosen
    percentiles_with: str | None = None
    # a goodput objective (`slo.<name>_ms`, `--goodput <name>:MS`) may name it
    objective: bool = False
    # one sample per output token gap, pooled across requests (ITL), not one per request;
    # a request keeps them as a list (`itls_ms`)
    per_token: bool = False
    # "none arrived" is null rather than 0 (vLLM reports 0 for no samples; ours need not)
    null_when_empty: bool = False
    # the report draws its percentiles against concurrency, on this scale
    plot: Plot | None = None
    # tables show it in seconds rather than ms (an end-to-end latency runs to seconds)
    seconds: bool = False
    # a throughput among sweep.csv's headline columns (every latency has its columns there)
    in_csv: bool = False


# vLLM's order (its result file's), ttft_content beside ttft where orch writes it
LATENCIES: tuple[Metric, ...] = (
    Metric("ttft", "TTFT", "Time to first token", "ms", "latency", True,
           "request start to the first chunk that brought a token (by the per-chunk usage "
           "count when the server streams one, else the first reasoning or content text)",
           choosable=True, objective=True, plot="log"),
    Metric("ttft_content", "content TTFT", "Time to first content token", "ms", "latency", True,
           "request start to the first content chunk",
           percentiles_with="ttft", null_when_empty=True),
    Metric("tpot", "TPOT", "Time per output token", "ms", "latency", True,
           "(e2el - ttft) / (output_tokens - 1); output tokens include reasoning",
           choosable=True, objective=True),
    Metric("itl", "ITL", "Inter-token latency", "ms", "latency", True,
           "per output token after the first chunk, pooled across requests: a chunk that "
           "brought n tokens (per-chunk usage) adds n gaps of its gap / n; without per-chunk "
           "usage, every gap between consecutive token-bearing chunks (itl_source says which)",
           choosable=True, per_token=True, plot="linear"),
    Metric("e2el", "latency", "Latency", "ms", "latency", True,
           "request start to the end of the response body",
           choosable=True, objective=True, seconds=True),
)
# The latency of the headline figures (the sweep table's "Avg latency", the report's
# "Latency by load"): it comes first in the CSV and the report, with its median.
HEADLINE = "e2el"

# sweep.csv's order: its headline throughputs first
THROUGHPUTS: tuple[Metric, ...] = (
    Metric("output_throughput", "output tok/s", "Output throughput", "tok/s", "throughput", True,
           "output tokens, reasoning included / level duration", in_csv=True),
    Metric("total_token_throughput", "total tok/s", "Total token throughput", "tok/s", "throughput", True,
           "(input + output tokens) / level duration", in_csv=True),
    Metric("request_throughput", "req/s", "Request throughput", "req/s", "throughput", True,
           "successful requests / level duration", in_csv=True),
    Metric("request_goodput", "goodput", "Request goodput", "req/s", "throughput", True,
           "requests meeting every latency objective / level duration (null without objectives)",
           in_csv=True),
    Metric("max_output_tokens_per_s", "peak tok/s", "Peak output tokens per second", "tok/s", "throughput",
           True, "output tokens in the busiest one-second bin of the level"),
    Metric("reasoning_throughput", "reasoning tok/s", "Reasoning throughput", "tok/s", "throughput", True,
           "reasoning tokens / level duration"),
    Metric("content_throughput", "content tok/s", "Content throughput", "tok/s", "throughput", True,
           "content tokens (output - reasoning) / level duration"),
    # Energy (a host with GPU telemetry): a rate per joule moves with the time scale as a
    # throughput does (the joules are the sampled power over the level's wall time).
    Metric("output_tokens_per_joule", "tok/J", "Output tokens per joule", "tok/J", "throughput",
           True, "output tokens / the GPUs' energy over the level (sampled power, integrated)"),
    Metric("output_tokens_per_s_per_w", "tok/s/W", "Output throughput per watt", "tok/s/W",
           "throughput", True, "output throughput / the GPUs' mean total power during the level"),
)

# Figures of the level that are the host's, not its requests' (a sampler's `level_figures`:
# bench/server_cpu.py). No Metric: never moved to model time (a CPU second per wall second is
# the host's own, whatever a simulator's scale) and in no latency or throughput table; named
# once here for the sampler that writes them and the limiter that reads them.
SERVER_CPU = "server_cpu"
SERVER_CPU_TOTAL = "server_cpu_total"
HOST_FIGURES = {
    SERVER_CPU: "the busiest server process's CPU seconds per wall second (1.0 = one core)",
    SERVER_CPU_TOTAL: "all the server's processes' CPU seconds per wall second",
}

METRICS: tuple[Metric, ...] = LATENCIES + THROUGHPUTS
BY_NAME = {m.name: m for m in METRICS}

# The plan's `percentile_metrics` and `--goodput` choices, as typed names (the plan model
# spells the Literal out, since a type cannot be built from a tuple; a test holds them equal).
CHOOSABLE = tuple(m.name for m in LATENCIES if m.choosable)
OBJECTIVES = tuple(m.name for m in LATENCIES if m.objective)

_STAT = r"mean|median|std|min|max|p\d+(?:\.\d+)?"
_KEY = re.compile(rf"^(?P<stat>{_STAT})_(?P<metric>{'|'.join(m.name for m in LATENCIES)})_ms$")


def percentile_key(p: float) -> str:
    """99 -> 'p99', 99.9 -> 'p99.9' (the naming of vllm bench serve's result keys)."""
    return f"p{int(p)}" if float(p).is_integer() else f"p{p}"


def stat_key(stat: str, metric: str) -> str:
    """("mean", "ttft") -> "mean_ttft_ms"; a percentile as its key: ("p99", "itl")."""
    return f"{stat}_{metric}_ms"


def percentile_stat_key(p: float, metric: str) -> str:
    """(99, "ttft") -> "p99_ttft_ms"."""
    return stat_key(percentile_key(p), metric)


def parse_stat_key(key: str) -> tuple[str, Metric] | None:
    """"p99.9_itl_ms" -> ("p99.9", itl); None for any key that is no latency statistic."""
    found = _KEY.match(key)
    return (found["stat"], BY_NAME[found["metric"]]) if found else None


def with_percentiles(chosen: Sequence[str]) -> tuple[str, ...]:
    """The latencies whose percentiles a level file holds, given the plan's choice: the
    chosen ones and those computed beside them (ttft_content with ttft)."""
    return tuple(m.name for m in LATENCIES if m.name in chosen or m.percentiles_with in chosen)


def headline_first() -> tuple[Metric, ...]:
    """The latencies in the order the CSV and the report show them."""
    return tuple(sorted(LATENCIES, key=lambda m: m.name != HEADLINE))


def model_time(key: str, value: float, time_scale: float) -> float | None:
    """A figure of a level file in the model's own time, or None when it has none (a
    count, a fraction, a key no metric owns)."""
    parsed = parse_stat_key(key)
    if key == "duration" or (parsed is not None and parsed[1].scales):
        return value / time_scale
    metric = BY_NAME.get(key)
    if metric is not None and metric.kind == "throughput" and metric.scales:
        return value * time_scale
    return None
