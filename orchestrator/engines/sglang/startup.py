"""SGLang's start-up, read from its log: the phases it prints, in order, and the figures it
gives (the KV cache's tokens, the CUDA graph capture's seconds).

SGLang's lines, read in its 0.4.6.post5, 0.5.2 and 0.5.23 wheels (srt/model_executor/
model_runner.py, mem_cache/memory_pool.py, entrypoints/http_server.py; 0.5.23's CUDA graph
lines in model_runner_components/cuda_graph_setup.py), behind its prefix
`[2025-01-01 12:00:00 TP0] ` (` TP0` only with TP > 1); the patterns take every version's:

    Load weight begin. avail mem=78.50 GB
    Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=63.20 GB, mem usage=15.30 GB.
    KV Cache is allocated. #tokens: 412345, K size: 24.00 GB, V size: 24.00 GB
    Memory pool end. avail mem=12.10 GB
    Capture cuda graph begin. This can take up to several minutes. avail mem=12.00 GB
    Capture cuda graph end. Time elapsed: 21.43 s. mem usage=1.10 GB. avail mem=10.90 GB.
    INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
    The server is fired up and ready to roll!

(0.5.23: `Load weight end. elapsed=...`, `KV Cache is allocated. dtype: ..., #tokens: ...`,
`Capture target decode CUDA graph begin. ...` / `... end. bs=[...], elapsed=21.43 s, ...`.)

Pure: lines in, phases out; the same record shape as every engine's (startup.json).
"""

from __future__ import annotations

import re

from orchestrator.engines.startup_log import Phase, StartupLog, Status

ORDER = ("process", "weights", "kv_cache", "cuda_graphs", "api_server", "ready")
LABELS = {"process": "starting", "weights": "loading weights", "kv_cache": "allocating KV cache",
          "cuda_graphs": "capturing CUDA graphs", "api_server": "starting the API server",
          "ready": "ready"}
_NUM = r"(\d+(?:\.\d+)?)"
# (pattern, phase, begins or ends it): a line may begin one phase and end the one before.
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"Load weight begin"), "weights", "begin"),
    (re.compile(r"Load weight end"), "weights", "end"),
    (re.compile(r"KV Cache is allocated\. (?:dtype: \S+, )?#tokens: (\d+)"), "kv_cache", "begin"),
    (re.compile(r"Memory pool end"), "kv_cache", "end"),
    (re.compile(r"Capture (?:[\w ]+ )?(?:cuda|CUDA|cpu) graph begin"), "cuda_graphs", "begin"),
    (re.compile(rf"Capture (?:[\w ]+ )?(?:cuda|CUDA|cpu) graph end\..*?(?:Time elapsed: |elapsed=){_NUM} s"),
     "cuda_graphs", "end"),
    (re.compile(r"Uvicorn running on|Starting embedded Granian"), "api_server", "begin"),
    (re.compile(r"The server is fired up and ready to roll!"), "ready", "begin"),
)


class SglangStartup(StartupLog[Phase]):
    """SGLang's start-up, fed its log: `current()` for a live line, `summary()` at the end."""

    def __init__(self, origin: float | None = None) -> None:
        super().__init__(Phase, ORDER, LABELS, origin)

    def _line(self, line: str, now: float) -> None:
        for pattern, name, edge in _RULES:
            match = pattern.search(line)
            if match:
                self._mark(name, edge, match, now)

    def _mark(self, name: str, edge: str, match: re.Match[str], now: float) -> None:
        if edge == "begin":
            for earlier in ORDER[:ORDER.index(name)]:  # a phase begun closes the ones before
                record = self.phases.get(earlier)
                if record is not None and record.ended_at is None:
                    record.ended_at = now
            record = self.phases.setdefault(name, Phase(name, now))
            if name == "kv_cache":
                self.facts["kv_cache_tokens"] = record.details["tokens"] = int(match.group(1))
            if name == "ready":
                record.ended_at = now
        else:  # every TP rank prints its own: the first one's counts
            record = self.phases.setdefault(name, Phase(name, now))
            if record.ended_at is None:
                record.ended_at = now
                record.engine_seconds = float(match.group(1)) if match.groups() else None

    def current(self, now: float | None = None) -> Status | None:
        if not self.phases or self.origin is None:
            return None
        latest = max(self.phases.values(), key=lambda r: ORDER.index(r.name))
        label = LABELS[latest.name] if latest.ended_at is None or latest.name == "ready" \
            else f"after {LABELS[latest.name]}"
        at = now if now is not None else (latest.ended_at or latest.started_at)
        return Status(latest.name, label, max(0.0, at - self.origin), self.ready)
