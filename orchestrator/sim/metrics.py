"""Engine metrics with vLLM's names and labels, in Prometheus text exposition (facts §6).

Counted by hand rather than with prometheus_client because an observation happens for every
generated token; the text mirrors prometheus_client's own output (counters as `_total` plus a
`_created` gauge, histograms as cumulative `_bucket`/`_count`/`_sum`, labels sorted).
Durations are wall-clock seconds as measured; divide by the time scale for model seconds.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from dataclasses import dataclass, field

from orchestrator.sim.scheduler import Sequence

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
               2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                   50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000,
                 50000, 100000)  # fmt: skip
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
# vLLM's NixlPromMetrics buckets: transfer seconds, and bytes from 2 KiB to 8 GiB.
NIXL_TIME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
NIXL_BYTES_BUCKETS = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))


def format_value(value: float) -> str:
    """A sample value as Prometheus clients print it (Go-style exponent for large floats)."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and "e" not in text and dot > 6:
        mantissa = (text[0] + "." + text[1:dot] + text[dot + 1 :]).rstrip("0").rstrip(".")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in sorted(pairs.items())
    )
    return "{" + inner + "}"


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect_left(self.buckets, value)] += times
        self.total += value * times
        self.count += times


class EngineMetrics:
    """Counts what the scheduler does (it is the scheduler's `StepObserver`)."""

    def __init__(self) -> None:
        self.created = time.time()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.finish_counts: dict[str, int] = dict.fromkeys(FINISH_REASONS, 0)
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(REQUEST_BUCKETS)
        self.queue = Histogram(REQUEST_BUCKETS)
        self.request_prompt = Histogram(TOKEN_BUCKETS)
        self.request_generation = Histogram(TOKEN_BUCKETS)
        self.external_prompt_tokens = 0  # prompt tokens whose KV came by transfer (P/D)
        self.xfer_time = Histogram(NIXL_TIME_BUCKETS)
        self.xfer_bytes = Histogram(NIXL_BYTES_BUCKETS)

    # StepObserver -----------------------------------------------------------------
    def admitted(self, seq: Sequence, now: float, first: bool) -> None:
        if first:
            self.prompt_tokens += seq.prompt_tokens
            self.external_prompt_tokens += seq.remote_tokens
            self.queue.observe(now - seq.arrival)

    def transferred(self, seconds: float, nbytes: float) -> None:
        """A remote prefill's KV arrived: `seconds` on the link (wall), `nbytes` bytes."""
        self.xfer_time.observe(seconds)
        self.xfer_bytes.observe(nbytes)

    def tokens(self, running: list[Sequence], now: float) -> None:
        self.generation_tokens += len(running)
        # Sequences that stepped together share their previous token time: group them so a
        # step costs one histogram update per group, not per sequence.
        previous: dict[float, int] = {}
        for seq in running:
            if seq.generated == 0:
                self.ttft.observe(now - seq.arrival)
            else:
                last = seq.last_token_at
                previous[last] = previous.get(last, 0) + 1
        for last, count in previous.items():
            self.itl.observe(now - last, count)

    def finished_request(self, seq: Sequence, now: float, reason: str) -> None:
        self.finish_counts[reason] = self.finish_counts.get(reason, 0) + 1
        self.e2e.observe(now - seq.arrival)
        self.request_prompt.observe(seq.prompt_tokens)
        self.request_generation.observe(seq.generated)

    def finished(self, seq: Sequence, now: float) -> None:
        self.finished_request(seq, now, seq.finish_reason or "stop")

    def preempted(self, seq: Sequence) -> None:
        self.preemptions += 1


# name, help text, EngineMetrics attribute: the histograms of the page, in its order
_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
    ("vllm:request_queue_time_seconds",
     "Histogram of time spent in WAITING phase for request.", "queue"),
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", "request_prompt"),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.",
     "request_generation"),
)


class _Page:
    """The exposition text, one metric family at a time, as prometheus_client writes it."""

    def __init__(self, model_name: str, created: float) -> None:
        self.base = {"model_name": model_name, "engine": "0"}
        self.labels = _labels(self.base)
        self.created = format_value(created)
        self.out: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: list[str]) -> None:
        self.out.append(f"# HELP {name} {help_text}")
        self.out.append(f"# TYPE {name} {kind}")
        self.out.extend(samples)

    def gauge(self, name: str, help_text: str, value: float, labels: str | None = None) -> None:
        shown = self.labels if labels is None else labels
        self.family(name, "gauge", help_text, [f"{name}{shown} {format_value(float(value))}"])

    def counter(self, name: str, help_text: str,
                series: list[tuple[dict[str, str], float]]) -> None:
        totals, stamps = [], []
        for extra, value in series:
            lab = _labels({**self.base, **extra})
            totals.append(f"{name}_total{lab} {format_value(float(value))}")
            stamps.append(f"{name}_created{lab} {self.created}")
        self.family(f"{name}_total", "counter", help_text, totals)
        self.family(f"{name}_created", "gauge", help_text, stamps)

    def histogram(self, name: str, help_text: str, hist: Histogram) -> None:
        samples = []
        cumulative = 0
        for bound, count in zip((*hist.buckets, math.inf), hist.counts, strict=True):
            cumulative += count
            le = _labels({**self.base, "le": format_value(float(bound))})
            samples.append(f"{name}_bucket{le} {format_value(float(cumulative))}")
        samples.append(f"{name}_count{self.labels} {format_value(float(hist.count))}")
        samples.append(f"{name}_sum{self.labels} {format_value(hist.total)}")
        self.family(name, "histogram", help_text, samples)
        self.family(f"{name}_created", "gauge", help_text,
                    [f"{name}_created{self.labels} {self.created}"])

    def text(self) -> str:
        return "\n".join(self.out) + "\n"


def render(
    metrics: EngineMetrics,
    model_name: str,
    gauges: tuple[int, int, float],
    info: dict[str, str],
    cache_info: dict[str, str],
    kv_connector: str | None = None,
) -> str:
    """The /metrics page; a server with a KV connector (P/D) also counts its prompt tokens
    by source, and NIXL's transfer families with NixlConnector."""
    page = _Page(model_name, metrics.created)
    running, waiting, kv = gauges
    page.gauge("orch_simulator_info", "This server is the orch vLLM simulator.", 1.0,
               _labels(info))
    page.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
               running)
    page.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
               waiting)
    page.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv)
    page.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", 1.0,
               _labels({**page.base, **cache_info}))
    page.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                 [({}, metrics.preemptions)])
    page.counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                 [({}, metrics.prompt_tokens)])
    page.counter("vllm:generation_tokens", "Number of generation tokens processed.",
                 [({}, metrics.generation_tokens)])
    page.counter("vllm:request_success", "Count of successfully processed requests.",
                 [({"finished_reason": r}, v) for r, v in metrics.finish_counts.items()])
    for name, help_text, attribute in _HISTOGRAMS:
        page.histogram(name, help_text, getattr(metrics, attribute))
    if kv_connector is not None:
        _transfer_families(page, metrics, nixl=kv_connector == "NixlConnector")
    return page.text()


def _transfer_families(page: _Page, metrics: EngineMetrics, *, nixl: bool) -> None:
    external = metrics.external_prompt_tokens
    sources = {"local_compute": metrics.prompt_tokens - external, "local_cache_hit": 0,
               "external_kv_transfer": external}
    page.counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
                 [({"source": k}, v) for k, v in sources.items()])
    if not nixl:
        return
    page.histogram("vllm:nixl_xfer_time_seconds",
                   "Histogram of transfer duration for NIXL KV Cache transfers.", metrics.xfer_time)
    page.histogram("vllm:nixl_bytes_transferred",
                   "Histogram of bytes transferred per NIXL KV Cache transfers.",
                   metrics.xfer_bytes)
    page.counter("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.",
                 [({}, 0)])
