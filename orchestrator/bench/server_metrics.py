"""The server's own view of a level: `/metrics` scraped at its start, its end and every
interval during it, and the server-side throughput as a cross-check of the client's.

`Scraper` is the sweep's first sampler (samplers.py): it runs in a thread with httpx (not
on the event loop that stamps token arrivals) and keeps only the raw lines of the names
below; parsing waits until the level is over. It fills the level's `server_metrics`. The server's own counters are read where it has them: vLLM's `vllm:` names and
llama.cpp's `llamacpp:` names (llama-server --metrics); a server with neither is said to
have none (`source: none`), never taken for one that counted nothing. Which names carry what
is each engine's to say (`Engine.metrics`, engines/*).

How often: at least PER_LEVEL (10) scrapes in each repeat's wall time, whatever its length.
The interval grows with the time the repeat has run (`scrape_interval`: a tenth of it),
from a floor up to `metrics_interval`: a short level is scraped every floor, a long one
every `metrics_interval` once it has run ten of them. The floor is FLOOR_S (0.1 s) for a
server, so a scrape never comes more than 10 times a second; a simulator's is FLOOR_S times
its time scale, at least SIM_FLOOR_S (20 ms): at time scale 0.05 a level lasts a twentieth
of its model time, and its scrapes come that much oftener (`scrape_floor`).

A server whose `/metrics` misbehaves (no answer, an error, garbage, a body without end) costs
each scrape at most its timeout (scrape.py's bounds) and the benchmark goes on: the level's
block says `problem: "server /metrics at URL: <what was wrong>"`. A scrape that timed out
ends that repeat's scraping (one wait per repeat, not one per interval); a value that is not
a finite count (NaN, Inf, negative) or a line that is not a sample is never counted.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

import httpx

from orchestrator import http_deadline
from orchestrator.bench.samplers import Snapshot
from orchestrator.bench.scrape import fetch
from orchestrator.engines import metric_names

# What a level reads of the server, by key; the names that carry each are the engines'
# (engines/*: MetricNames), the first one a server exports wins.
GAUGE_KEYS = ("running", "waiting", "kv_cache_usage")
COUNTER_KEYS = ("generation_tokens", "prompt_tokens", "requests_finished", "preemptions")


@cache
def names_of() -> dict[str, tuple[str, ...]]:
    """A gauge's or counter's key -> every engine's names for it (read when first needed:
    the engines' packages are imported on first use)."""
    dialects = metric_names()
    return {key: tuple(name for d in dialects for name in {**d.gauges, **d.counters}.get(key, ()))
            for key in (*GAUGE_KEYS, *COUNTER_KEYS)}


def wanted_names() -> tuple[str, ...]:
    """The metric names a scrape keeps (line prefixes)."""
    return tuple(sorted({name for names in names_of().values() for name in names}))


def parse_samples(lines: Iterable[str]) -> dict[str, float]:
    """Prometheus text lines -> metric name -> value summed over label sets (labels are
    parsed as a set, so their order does not matter); comments and garbage are skipped."""
    return parse_checked(lines)[0]


def parse_checked(lines: Iterable[str]) -> tuple[dict[str, float], list[str]]:
    """`parse_samples`, and the lines left out as not samples or not counts (NaN, Inf, a
    negative value: no counter or gauge orch reads has one)."""
    totals: dict[str, float] = {}
    rejected: list[str] = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            rest = rest.rpartition("}")[2]
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        try:
            value = float(fields[0]) if fields else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            rejected.append(line)
            continue
        name = name.strip()
        totals[name] = totals.get(name, 0.0) + value
    return totals, rejected


@dataclass(frozen=True)
class ScrapeEnd(Snapshot):
    """Last of a repeat's snapshots when a scrape went wrong: what, in words."""

    problem: str = ""


def rejected_problem(rejected: Sequence[str]) -> str:
    """What the left-out lines were, for a sampler's `problem`."""
    first = rejected[0] if len(rejected[0]) <= 120 else rejected[0][:120] + "..."
    return f"{len(rejected)} line(s) not counted, not a sample or not a count: {first!r}"


def _value(snapshot: Snapshot, key: str) -> float | None:
    """The gauge's or counter's value under the first of its names the server exports."""
    for name in names_of()[key]:
        if name in snapshot.values:
            return snapshot.values[name]
    return None


def summarize_snapshots(snapshots: Sequence[Snapshot]) -> dict[str, Any]:
    """Per-level server view: gauge peaks and means, counter deltas, server throughput."""
    problem = next((s.problem for s in snapshots if isinstance(s, ScrapeEnd)), "")
    snapshots = [s for s in snapshots if not isinstance(s, ScrapeEnd)]
    if not snapshots:
        return {"scrapes": 0, "source": "none", **({"problem": problem} if problem else {})}
    out: dict[str, Any] = {"scrapes": len(snapshots), "source": source_of(snapshots)}
    if problem:
        out["problem"] = problem
    for key in GAUGE_KEYS:
        values = [v for v in (_value(s, key) for s in snapshots) if v is not None]
        if values:
            out[f"max_{key}"] = max(values)
            out[f"mean_{key}"] = sum(values) / len(values)
    first, last = snapshots[0], snapshots[-1]
    span = last.t_s - first.t_s
    for key in COUNTER_KEYS:
        a, b = _value(first, key), _value(last, key)
        if a is not None and b is not None:
            out[f"delta_{key}"] = b - a
    generated = out.get("delta_generation_tokens")
    if generated is not None and span > 0:
        out["server_output_throughput"] = generated / span
        out["span_s"] = span
    out["timeline"] = [
        {
            "t_s": round(s.t_s, 3),
            **{k: v for k in GAUGE_KEYS if (v := _value(s, k)) is not None},
            **{k: v for k in ("generation_tokens",) if (v := _value(s, k)) is not None},
        }
        for s in snapshots
    ]
    return out


def source_of(snapshots: Sequence[Snapshot]) -> str:
    """Whose counters the server exports (an engine's metric prefix: `vllm`, `llamacpp`, ...),
    or `none` (no known name)."""
    names = {name for s in snapshots for name in s.values}
    for prefix in (d.prefix for d in metric_names()):
        if any(name.startswith(prefix + ":") for name in names):
            return prefix
    return "none"


def merge_repeats(repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A level's `server_metrics`: None when nothing was scraped (`--no-metrics`), one
    repeat's summary as it is, else the last one's with the server throughput averaged over
    the repeats and every repeat's summary under `repeats`."""
    scraped = [dict(s) for s in repeats if s.get("scrapes")]
    problems = [s["problem"] for s in repeats if s.get("problem")]
    if not scraped:  # nothing read: said so when a scrape went wrong, else none was asked
        return dict(next(s for s in repeats if s.get("problem"))) if problems else None
    if len(scraped) == 1:
        return {**scraped[0], **({"problem": problems[-1]} if problems else {})}
    rates = [s["server_output_throughput"] for s in scraped if "server_output_throughput" in s]
    merged = dict(scraped[-1])
    if rates:
        merged["server_output_throughput"] = sum(rates) / len(rates)
    merged["repeats"] = scraped
    if problems:
        merged["problem"] = problems[-1]
    return merged


PER_LEVEL = 10
FLOOR_S = 0.1
SIM_FLOOR_S = 0.02


def scrape_floor(simulated: bool, time_scale: float | None) -> float:
    """The shortest interval between scrapes of this server (module doc)."""
    if simulated and time_scale:
        return max(SIM_FLOOR_S, FLOOR_S * time_scale)
    return FLOOR_S


def scrape_interval(elapsed_s: float, configured_s: float, floor_s: float) -> float:
    """The wait before the next scrape, `elapsed_s` into a repeat: a tenth of the time run so
    far, between the floor and the configured interval (never above what the plan asks)."""
    return max(min(floor_s, configured_s), min(configured_s, elapsed_s / PER_LEVEL))


@dataclass
class Scraper:
    """Scrapes `url` at start(), every `interval` seconds, and at stop(); `interval` None
    (`--no-metrics`) scrapes nothing, and the level says `server_metrics: null`. With a
    `floor_s`, the interval follows `scrape_interval` (at least PER_LEVEL scrapes a repeat)."""

    url: str
    interval: float | None
    headers: Mapping[str, str] = field(default_factory=dict)
    wanted: tuple[str, ...] = field(default_factory=wanted_names)  # the names kept
    block: ClassVar[str] = "server_metrics"
    repeat_keys: ClassVar[tuple[str, ...]] = ("server_output_throughput",)
    origin_ns: int = 0
    _raw: list[tuple[float, list[str]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _client: httpx.Client | None = None
    failures: int = 0
    problem: str = ""  # the repeat's first scrape problem
    _gave_up: bool = False  # a scrape of the repeat timed out: no more waits this repeat
    what: ClassVar[str] = "server /metrics"
    floor_s: float | None = None  # None: every `interval`, however short the repeat

    def _scrape(self) -> None:
        if self._client is None or self._gave_up:
            return
        before = time.perf_counter_ns()
        page = fetch(self._client, self.url, self.wanted, self._timeout())
        after = time.perf_counter_ns()
        if page.problem:
            self.failures += 1
            self.problem = self.problem or page.problem
            self._gave_up = page.timed_out
            return
        self._raw.append((((before + after) / 2 - self.origin_ns) / 1e9, page.lines))

    def _timeout(self) -> float:
        return min(5.0, max(1.0, self.interval or 1.0))

    def said(self, problem: str) -> str:
        """A problem as the level's block says it: whose, where, what."""
        shown = httpx.URL(self.url).copy_with(username=None, password=None)
        return f"{self.what} at {shown}: {problem}"

    def _loop(self, interval: float, stop: threading.Event) -> None:
        began = time.perf_counter()
        while not stop.wait(self._wait(interval, began)):
            began = time.perf_counter()
            self._scrape()

    def _wait(self, interval: float, began: float) -> float:
        """Till the next scrape, counted from the last one's start: a slow answer is not
        added to the interval."""
        if self.floor_s is None:
            return interval
        step = scrape_interval((time.perf_counter_ns() - self.origin_ns) / 1e9, interval, self.floor_s)
        return max(0.0, began + step - time.perf_counter())

    def start(self, origin_ns: int) -> None:
        self.origin_ns, self._raw, self._stop = origin_ns, [], threading.Event()
        self.failures, self.problem, self._gave_up = 0, "", False
        if not self.interval:
            return
        self._client = http_deadline.client(self._timeout(), self.headers)
        self._scrape()
        self._thread = threading.Thread(target=self._loop, args=(self.interval, self._stop),
                                        name="orch-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self._timeout() + 1)  # a scrape's longest (scrape.py)
            self._thread = None
        if self._client is not None:
            self._scrape()
            self._client.close()
            self._client = None

    def snapshots(self) -> list[Snapshot]:
        out: list[Snapshot] = []
        rejected: list[str] = []
        for t, lines in self._raw:
            values, left_out = parse_checked(lines)
            out.append(Snapshot(t, values))
            rejected += left_out
        problem = self.problem or (rejected_problem(rejected) if rejected else "")
        if self.failures and self.problem:
            problem = f"{problem} ({self.failures} scrape(s) failed)"
        return [*out, ScrapeEnd(out[-1].t_s if out else 0.0, {}, self.said(problem))] if problem else out

    def summarize(self, snapshots: Sequence[Snapshot]) -> dict[str, Any]:
        return summarize_snapshots(snapshots)

    def merge(self, repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        return merge_repeats(repeats)

    def level_figures(self, block: Mapping[str, Any] | None,
                      level: Mapping[str, Any]) -> dict[str, Any]:
        return {}  # the server's throughput stays in its block, a cross-check
