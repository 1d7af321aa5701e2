"""Start-up phases of a vLLM server (or the simulator), read from its log as it grows.

A real start of a large model takes minutes (13 for Kimi-K2.5 on 8 PCIe GPUs); the phases say
where that time goes and show progress while waiting. The markers are vLLM's own lines, in
both the 0.17.1 and 0.33 wordings; the simulator prints the same:

    process      launch .. first phase marker
    weights      "Starting to load model" .. "Loading weights took Y seconds" / "Model
                 loading took X GiB memory and Y seconds"
    compile      "Using cache directory ... torch.compile" / "Starting torch.compile" ..
                 "torch.compile takes|took X s in total"; on the CPU (0.32) "Warming up
                 model for the compilation..." .. "Warming up done."
    kv_cache     (memory profiling) .. "<pool> KV cache size: N tokens"
    cuda_graphs  "Capturing CUDA graphs" .. "Graph capturing finished in N secs"
    api_server   "Starting vLLM API server 0 on URL" / "Starting vLLM server on URL" ..
                 "Application startup complete."
    ready        "Application startup complete."

Beside the phases, the kernels vLLM chose (engines/vllm/kernels.py: attention, MoE, GEMM
kernels, KV cache dtype, CUDA graphs, fallbacks) are read from the same lines into
`facts["kernels"]`, and what it says of the compiled graphs (loaded from the compile cache,
compiled now: engines/compile_cache.py) into `facts["compile_graphs"]`.

Times are the controller's clock at `feed` (so their precision is the poll interval); the
durations vLLM prints itself are kept beside them (`engine_seconds`). A phase whose start marker
is missing (e.g. no compile cache line) starts when the previous phase ended; starting a
phase closes every earlier one still open. Tensor-parallel workers print some markers once
each: repeats extend the phase while no later phase has begun, and keep the largest
duration vLLM printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from orchestrator.engines.compile_cache import GraphLog
from orchestrator.engines.startup_log import Phase, StartupLog
from orchestrator.engines.vllm.kernels import KernelLog

ORDER = ("process", "weights", "compile", "kv_cache", "cuda_graphs", "api_server", "ready")
LABELS = {
    "process": "starting process",
    "weights": "loading weights",
    "compile": "torch.compile",
    "kv_cache": "profiling memory, sizing KV cache",
    "cuda_graphs": "capturing CUDA graphs",
    "api_server": "starting API server",
    "ready": "ready",
}
_NUM = r"(\d+(?:\.\d+)?)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass
class PhaseRecord(Phase):
    progress: str | None = None

    @property
    def label(self) -> str:
        return LABELS[self.name]


@dataclass(frozen=True)
class PhaseStatus:
    """What to show while waiting: the phase in progress and for how long."""

    name: str
    label: str
    elapsed_s: float  # in this phase
    total_s: float  # since launch
    progress: str | None
    ready: bool

    @property
    def api_up(self) -> bool:
        return self.name in ("api_server", "ready")

    def describe(self) -> str:
        text = f"{self.label} ({_clock(self.elapsed_s)}"
        if self.progress:
            text += f", {self.progress}"
        return text + f"; {_clock(self.total_s)} since launch)"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}" if minutes else f"{seconds:.1f}s"


# (pattern, handler name). Checked in order; a line may match several.
_RULES: list[tuple[re.Pattern[str], str]] = [
    # The plain form (VLLM_DISABLE_LOG_LOGO=1, or no log formatter) ...
    (re.compile(r"vLLM server version (\S+), serving model (\S+)"), "_server_version"),
    # ... and vLLM's default: an ASCII-art logo whose lines end "version X" and "model Y".
    (re.compile(r"█\s+version\s+(\S+)\s*$"), "_logo_version"),
    (re.compile(r"█\s+model\s+(\S+)\s*$"), "_logo_model"),
    (re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\)"), "_engine_version"),
    (re.compile(r"Starting to load model (\S+?)(?:\.\.\.)?\s*$"), "_weights_start"),
    (
        re.compile(r"Loading safetensors checkpoint shards:\s*(\d+)% Completed \| (\d+)/(\d+)"),
        "_shards",
    ),
    (re.compile(rf"Model loading took {_NUM} GiB(?: memory)? and {_NUM} seconds"), "_weights_end"),
    # Every model runner (GPU and CPU) prints this one; the CPU runner prints no other.
    (re.compile(rf"Loading weights took {_NUM} seconds"), "_weights_loaded"),
    (
        re.compile(
            r"Using cache directory: .* for vLLM's torch\.compile|Starting torch\.compile"
            r"|Dynamo bytecode transform time"
            # The CPU model runner compiles while it warms up (0.32).
            r"|Warming up model for the compilation|Compiling model again due to"
        ),
        "_compile_start",
    ),
    (
        re.compile(
            rf"torch\.compile (?:takes|took) {_NUM} s in total"
            rf"|torch\.compile and initial profiling/warmup run together took {_NUM} s"
        ),
        "_compile_end",
    ),
    (re.compile(r"Warming up done\."), "_warmup_done"),
    (re.compile(rf"Available KV cache memory: {_NUM} GiB"), "_kv_available"),
    # The CPU worker's KV cache: VLLM_CPU_KVCACHE_SPACE, or a share of the node's memory.
    (re.compile(rf"Explicitly set \({_NUM}/{_NUM}\) GiB for KV cache"), "_kv_available"),
    (re.compile(r"(\w+) KV cache size: ([\d,]+) tokens"), "_kv_size"),
    (
        re.compile(rf"Maximum concurrency for ([\d,]+) tokens per request: {_NUM}x"),
        "_max_concurrency",
    ),
    (re.compile(r"Capturing CUDA graphs.*?(\d+)%"), "_graphs_progress"),
    (re.compile(r"Capturing CUDA graphs"), "_graphs_start"),
    (
        re.compile(rf"Graph capturing finished in {_NUM} secs?(?:, took {_NUM} GiB)?"),
        "_graphs_end",
    ),
    (
        # 0.17.1: "took X seconds"; 0.32: "took X s"; 0.33: "took X s (compilation: Y s ...".
        re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {_NUM} s"
                   rf"(?:econds)?(?: \(compilation: {_NUM} s)?"),
        "_engine_init",
    ),
    (re.compile(r"Starting vLLM (?:API server \d+ |server )on (\S+)"), "_api_start"),
    (re.compile(r"Application startup complete\."), "_ready"),
]


class PhaseTracker(StartupLog[PhaseRecord]):
    """Feed it log lines as they arrive; ask `current()` for a live line, `summary()` at the end."""

    def __init__(self, origin: float | None = None) -> None:
        super().__init__(PhaseRecord, ORDER, LABELS, origin)
        self.attempts = 1
        self.kernels = KernelLog()
        self.graphs = GraphLog()  # loaded from the compile cache or compiled (a warm start)

    def feed(self, lines: Iterable[str], now: float) -> None:
        """Whole log lines that arrived by controller time `now`."""
        super().feed(lines, now)
        kernels = self.kernels.to_json()
        if kernels:
            self.facts["kernels"] = kernels
        graphs = self.graphs.to_json()
        if graphs:
            self.facts["compile_graphs"] = graphs

    def _line(self, line: str, now: float) -> None:
        line = _ANSI.sub("", line)  # VLLM_LOGGING_COLOR=1 colours levels and the logo
        for pattern, handler in _RULES:
            match = pattern.search(line)
            if match:
                method: Callable[[re.Match[str], float], None] = getattr(self, handler)
                method(match, now)
        self.kernels.line(line)
        self.graphs.line(line)

    # --- phase bookkeeping -------------------------------------------------------------

    def _later_began(self, name: str) -> bool:
        index = ORDER.index(name)
        return any(ORDER.index(other) > index for other in self.phases)

    def _close_earlier(self, name: str, now: float) -> None:
        index = ORDER.index(name)
        for other, record in self.phases.items():
            if ORDER.index(other) < index and record.ended_at is None:
                record.ended_at = now

    def _last_boundary(self, name: str, now: float) -> float:
        index = ORDER.index(name)
        ends = [
            r.ended_at
            for n, r in self.phases.items()
            if ORDER.index(n) < index and r.ended_at is not None
        ]
        return max(ends) if ends else now

    def _begin(self, name: str, now: float) -> PhaseRecord:
        record = self.phases.get(name)
        if record is None:
            self._close_earlier(name, now)
            record = PhaseRecord(name=name, started_at=now)
            self.phases[name] = record
        return record

    def _end(self, name: str, now: float, engine_seconds: float | None = None) -> PhaseRecord:
        record = self.phases.get(name)
        if record is None:
            record = PhaseRecord(name=name, started_at=self._last_boundary(name, now))
            self._close_earlier(name, now)
            self.phases[name] = record
        if record.ended_at is None or not self._later_began(name):
            record.ended_at = now
        if engine_seconds is not None:
            record.engine_seconds = max(engine_seconds, record.engine_seconds or 0.0)
        record.progress = None
        return record

    # --- handlers --------------------------------------------------------------------

    def _new_attempt(self, now: float) -> None:
        """The server's first line: after any later phase, a new attempt appended to the same
        log, so start over."""
        if any(name != "process" for name in self.phases) or "vllm_version" in self.facts:
            self.phases = {}
            self.facts = {}
            self.kernels = KernelLog()
            self.graphs = GraphLog()
            self.attempts += 1
            self.origin = now
            self._begin("process", now)

    def _server_version(self, match: re.Match[str], now: float) -> None:
        self._new_attempt(now)
        self.facts["vllm_version"] = match.group(1)
        self.facts["model"] = match.group(2)

    def _logo_version(self, match: re.Match[str], now: float) -> None:
        self._new_attempt(now)
        self.facts["vllm_version"] = match.group(1)

    def _logo_model(self, match: re.Match[str], now: float) -> None:
        self.facts.setdefault("model", match.group(1))

    def _engine_version(self, match: re.Match[str], now: float) -> None:
        self.facts.setdefault("vllm_version", match.group(1))

    def _weights_start(self, match: re.Match[str], now: float) -> None:
        self._begin("weights", now)

    def _shards(self, match: re.Match[str], now: float) -> None:
        record = self.phases.get("weights") or self._begin("weights", now)
        if record.ended_at is None:
            record.progress = f"{match.group(2)}/{match.group(3)} shards ({match.group(1)}%)"

    def _weights_end(self, match: re.Match[str], now: float) -> None:
        record = self._end("weights", now, _number(match.group(2)))
        record.details["memory_gib"] = _number(match.group(1))

    def _weights_loaded(self, match: re.Match[str], now: float) -> None:
        self._end("weights", now, _number(match.group(1)))

    def _compile_start(self, match: re.Match[str], now: float) -> None:
        self._begin("compile", now)

    def _warmup_done(self, match: re.Match[str], now: float) -> None:
        if "compile" in self.phases:
            self._end("compile", now)

    def _compile_end(self, match: re.Match[str], now: float) -> None:
        seconds = match.group(1) or match.group(2)
        self._end("compile", now, _number(seconds))

    def _kv_available(self, match: re.Match[str], now: float) -> None:
        self.facts["kv_cache_memory_gib"] = _number(match.group(1))

    def _kv_size(self, match: re.Match[str], now: float) -> None:
        record = self._end("kv_cache", now)
        tokens = int(_number(match.group(2)))
        record.details["tokens"] = tokens
        self.facts["kv_cache_tokens"] = tokens

    def _max_concurrency(self, match: re.Match[str], now: float) -> None:
        value = {"tokens_per_request": int(_number(match.group(1))), "x": _number(match.group(2))}
        self.facts["max_concurrency"] = value
        if "kv_cache" in self.phases:
            self.phases["kv_cache"].details["max_concurrency"] = value

    def _graphs_progress(self, match: re.Match[str], now: float) -> None:
        record = self._begin("cuda_graphs", now)
        if record.ended_at is None:
            record.progress = f"{match.group(1)}%"

    def _graphs_start(self, match: re.Match[str], now: float) -> None:
        self._begin("cuda_graphs", now)

    def _graphs_end(self, match: re.Match[str], now: float) -> None:
        record = self._end("cuda_graphs", now, _number(match.group(1)))
        if match.group(2):
            record.details["memory_gib"] = _number(match.group(2))

    def _engine_init(self, match: re.Match[str], now: float) -> None:
        self.facts["engine_init_seconds"] = _number(match.group(1))
        if match.group(2):
            self.facts["compilation_seconds"] = _number(match.group(2))

    def _api_start(self, match: re.Match[str], now: float) -> None:
        record = self._begin("api_server", now)
        record.details["url"] = match.group(1)
        self.facts["api_url"] = match.group(1)

    def _ready(self, match: re.Match[str], now: float) -> None:
        if "ready" in self.phases:
            return
        self._end("api_server", now)
        record = self._begin("ready", now)
        record.ended_at = now
        if self.origin is not None:
            self.facts["ready_after_s"] = round(now - self.origin, 3)

    # --- views -----------------------------------------------------------------------

    def current(self, now: float | None = None) -> PhaseStatus | None:
        """The phase in progress (or the last one reached), for a live display."""
        if not self.phases or self.origin is None:
            return None
        latest = max(self.phases.values(), key=lambda r: ORDER.index(r.name))
        if now is None:
            now = latest.ended_at if latest.ended_at is not None else latest.started_at
        since = latest.started_at if latest.ended_at is None else latest.ended_at
        label = latest.label if latest.ended_at is None else f"after {latest.label}"
        if latest.name == "ready":
            label, since = "ready", latest.started_at
        return PhaseStatus(
            name=latest.name,
            label=label,
            elapsed_s=max(0.0, now - since),
            total_s=max(0.0, now - self.origin),
            progress=latest.progress,
            ready=self.ready,
        )
