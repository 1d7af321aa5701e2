"""A run folder written by runs/writer.py and read back by runs/reader.py: every record the
reader offers comes back equal to the one written (typed fields and extra keys alike)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.apply.compile import resolved_plan_yaml
from orchestrator.events import LevelEnd, StageEvent
from orchestrator.plan.loader import load_plan
from orchestrator.runs.reader import (
    frozen_sets,
    load_run,
    read_record,
    read_requests,
)
from orchestrator.runs.run_records import (
    HostFactsRecord,
    HostSteps,
    LevelResult,
    Startup,
    StepRecord,
    SweepSummary,
)
from orchestrator.runs.sources import resolve_run
from orchestrator.runs.writer import RunFolder, write_level, write_sweep

REPO = Path(__file__).resolve().parents[2]
HOST = "gpu1"


def _level(label: str, concurrency: int, throughput: float) -> dict[str, Any]:
    """A level as the sweep writes it: typed figures, vllm's extra keys, nested blocks."""
    return {
        "date": "20261130-000000", "endpoint_type": "openai-chat", "label": None,
        "model_id": "kimi-k2.5", "request_rate": "inf", "max_concurrency": concurrency,
        "duration": 2.5, "completed": 8, "failed": 1, "output_throughput": throughput,
        "mean_ttft_ms": 51.3, "p99_ttft_ms": 75.25, "mean_itl_ms": 16.3, "mean_e2el_ms": 7870.0,
        "median_e2el_ms": 7801.5, "errors": {"http_500": 1}, "level": label, "mode": "closed",
        "partial": False, "stopped": None,
        "repeats": [{"duration": 2.5, "completed": 8, "server_output_throughput": 60.0}],
        "server_metrics": {"scrapes": 3, "source": "vllm", "max_running": 4.0,
                           "timeline": [{"t_s": 0.0, "running": 4.0}]},
        "simulated": True, "time_scale": 0.1,
        "normalized": {"output_throughput": throughput * 0.1, "mean_e2el_ms": 78700.0},
        "metric_definitions": {"ttft": "time to the first token"},
        "flags": ["no_scaling"],
    }


def test_every_record_written_reads_back_equal(tmp_path: Path) -> None:
    loaded = load_plan(REPO / "plans/sim/kimi-nvfp4.yaml")
    folder = RunFolder.create(loaded.plan.name, loaded.digest, root=tmp_path / "runs",
                              hosts=[HOST], plan_file="plans/sim/kimi-nvfp4.yaml",
                              layers=loaded.layers, engine="sim", simulated=True)
    folder.write_plan(resolved_plan_yaml(loaded))
    facts = HostFactsRecord(host={"os": "debian 12", "gpus": [{"name": "RTX PRO 6000"}]},
                            probe_seconds=0.25, record_files={"checked": 3, "hashed": 1})
    folder.write_facts(HOST, facts)
    folder.write_freeze(HOST, "vllm==0.17.1\nflashinfer-python==0.6.4\n")
    steps = HostSteps(host=HOST, round_trips=5, seconds=30.5, service_url="http://127.0.0.1:8000",
                      steps=[StepRecord(step="service", status="changed", changes=["start"])],
                      startup_s=23.5, bench_dir="bench")
    folder.write_steps(steps)
    startup = Startup(url="http://127.0.0.1:8000", seconds=23.5,
                      phases=[{"phase": "weights", "duration_s": 17.0}], facts={"kv_cache": 1})
    folder.write_startup(HOST, startup)
    bench = folder.host(HOST).bench
    written = [_level("c1", 1, 609.0), _level("c4", 4, 1949.0)]
    levels = [LevelResult.model_validate(level) for level in written]
    rows = [{"level": "c1", "request_id": "r-0", "warmup": False, "ok": True, "error_kind": None,
             "ttft_ms": 51.3, "e2el_ms": 7870.0, "output_tokens": 480, "finish_reason": "stop",
             "itls_ms": [16.0, 16.5]}]
    for level in levels:
        write_level(bench, level, rows if level.level == "c1" else [])
    summary = SweepSummary(model="kimi-k2.5", simulated=True, time_scale=0.1, knee=4,
                           labels={"plan": loaded.plan.name, "host": HOST},
                           levels=[{"level": "c1", "output_throughput": 609.0}],
                           files={"c1": "level-c1.json"})
    write_sweep(bench, "level,output_throughput\nc1,609.0\n", summary)
    events = [StageEvent(HOST, stage="bench", status="running"),
              LevelEnd(HOST, label="c1", concurrency=1, completed=8, failed=1,
                       output_throughput=60.9, mean_e2el_ms=78700.0, model_time=True)]
    written_events = [folder.event(event) for event in events]
    folder.finish("complete")

    run = load_run(resolve_run(str(folder.path), tmp_path / "runs"))
    assert run.meta == folder.meta
    assert run.plan == loaded.plan.model_copy(update={"extends": None})  # layers merged
    assert run.plan_problem is None
    (host,) = run.hosts
    assert host.name == HOST and host.facts == facts.host
    assert read_record(folder.host(HOST).facts, HostFactsRecord) == facts
    assert read_record(folder.host(HOST).steps, HostSteps) == steps
    assert read_record(folder.host(HOST).startup, Startup) == startup
    assert frozen_sets(folder.path) == {HOST: ["vllm==0.17.1", "flashinfer-python==0.6.4"]}
    assert host.bench is not None
    assert host.bench.levels == levels
    # the file holds what was made, in its order, extras included
    assert [json.loads(bench.level(level.level).read_text()) for level in levels] == written
    assert [list(json.loads(bench.level(level.level).read_text())) for level in levels] == \
        [list(level) for level in written]
    assert host.bench.summary == summary
    assert [row.model_dump() for row in read_requests(bench.root, "c1")] == rows
    assert read_requests(bench.root, "c4") == []
    kept = [json.loads(line) for line in folder.layout.events.read_text().splitlines()]
    assert kept == written_events
    assert kept[1] == {"ts": kept[1]["ts"], **events[1].to_json()}


def test_an_old_startup_json_with_vllm_seconds_still_reads(tmp_path: Path) -> None:
    """startup.json written before the engines' summaries shared `engine_seconds`."""
    path = tmp_path / "startup.json"
    path.write_text(json.dumps({"url": "http://127.0.0.1:8000", "seconds": 20.0, "phases": [
        {"phase": "weights", "label": "loading weights", "start_s": 1.0, "end_s": 18.0,
         "duration_s": 17.0, "vllm_seconds": 16.5}]}))
    startup = read_record(path, Startup)
    assert startup.phases[0].engine_seconds == 16.5
    assert "vllm_seconds" not in startup.phases[0].model_dump()
