"""The compose cases of tests/bench/compose_cases.yaml made into levels: request records
and /metrics samples built from each case's data, composed as a sweep composes a level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.bench.client import StreamClient
from orchestrator.bench.http_stream import parse_target
from orchestrator.bench.level import Context, LevelRun, LevelSpec, Repeat, compose
from orchestrator.bench.load import RequestRun, Stop
from orchestrator.bench.request_record import RequestRecord
from orchestrator.bench.samplers import Snapshot
from orchestrator.bench.server_info import ServerInfo
from orchestrator.bench.server_metrics import Scraper
from orchestrator.bench.workload import Workload
from orchestrator.plan.models import Bench

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "compose_cases.yaml").read_text())
ORIGIN_NS = 10**12  # perf_counter nanoseconds: any origin will do, figures are relative
MS = 1_000_000
UNUSED = "http://127.0.0.1:9"  # compose never reaches the server


def _record(index: int, label: str, data: dict[str, Any], *, warmup: bool = False) -> RequestRecord:
    def at(ms: float) -> int:
        return ORIGIN_NS + int(ms * MS)

    record = RequestRecord(f"{label}-{index}", warmup=warmup, label=label, index=index,
                           start_ns=at(data["start"]), end_ns=at(data["end"]), status=200,
                           event_stream=True, token_ns=[at(t) for t in data.get("tokens", [])],
                           finish_reason=data.get("finish"))
    record.content_chunks = len(record.token_ns)
    if "scheduled" in data:
        record.scheduled_ns = at(data["scheduled"])
    if "usage" in data:
        record.prompt_tokens, record.completion_tokens = data["usage"]
    if "fail" in data:
        record.fail(*data["fail"])
    return record


def _repeat(index: int, data: dict[str, Any], label: str) -> Repeat:
    run = RequestRun(origin_ns=ORIGIN_NS, end_ns=ORIGIN_NS + data["duration_ms"] * MS,
                  stopped=data.get("stopped"))
    run.records = [_record(i, f"{label}-{index}", r) for i, r in enumerate(data["requests"])]
    samples = [Snapshot(t, {k: float(v) for k, v in values.items()})
               for t, values in data.get("server_metrics", [])]
    return Repeat(run, {"server_metrics": samples})


def warmup_count(case: dict[str, Any]) -> int:
    return int(case.get("warmup", 0))


def compose_case(case: dict[str, Any]) -> LevelRun:
    """The level a sweep would make of the case's requests (no server: compose is pure)."""
    config = Bench.model_validate(case["bench"])
    spec = LevelSpec(**case["level"])
    ctx = Context(
        config=config,
        client=StreamClient(parse_target(UNUSED), "/v1/chat/completions"),
        workload=Workload(config, "m"),
        server=ServerInfo(**case.get("server", {"model": "m"})),
        samplers=[Scraper(f"{UNUSED}/metrics", config.metrics_interval)],
        stop=Stop(),
        labels=dict(case.get("labels", {})),
    )
    warmup = [_record(i, f"{spec.label}-w", {"start": 0, "end": 10, "tokens": [5]}, warmup=True)
              for i in range(warmup_count(case))]
    repeats = [_repeat(i, r, spec.label) for i, r in enumerate(case["repeats"])]
    return compose(ctx, spec, repeats, warmup)
