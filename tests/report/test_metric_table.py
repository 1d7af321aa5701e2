"""The metric table (orchestrator/metrics.py) is the one list of metrics: every metric in it
reaches the level file, its model-time block, sweep.csv and the report, and the plan's
choices, the CSV's columns and the level file's definitions are the table's.

One level is summarized from constructed request records by the real code (summarize_level,
normalized, render_csv), read back as a LevelResult and compared (tables, `--json`)."""

from __future__ import annotations

import csv
import io
from typing import Any, get_args

from inmemory import run

from orchestrator.bench.gpu_telemetry import energy_figures
from orchestrator.bench.level_metrics import summarize_level
from orchestrator.bench.request_record import METRIC_DEFINITIONS, RequestRecord, derive
from orchestrator.bench.results import csv_columns, normalized, render_csv
from orchestrator.commands.bench import GOODPUT_KEYS
from orchestrator.metrics import (
    CHOOSABLE,
    LATENCIES,
    METRICS,
    OBJECTIVES,
    STATS,
    THROUGHPUTS,
    percentile_stat_key,
    stat_key,
    with_percentiles,
)
from orchestrator.plan.models import Bench, LatencyMetric, Slo
from orchestrator.report.compare_tables import comparison_tables
from orchestrator.report.comparison import compare
from orchestrator.runs.run_records import LevelResult

MS = 1_000_000
PERCENTILES = (50.0, 99.0)
SCALE = 0.1


def _record(start_ms: float, tokens_ms: list[float], reasoning: int) -> RequestRecord:
    """A finished request: `reasoning` reasoning chunks, then content; usage sent."""
    r = RequestRecord("r", start_ns=int(start_ms * MS))
    r.token_ns = [int(t * MS) for t in tokens_ms]
    r.reasoning_chunks = reasoning
    r.content_chunks = len(tokens_ms) - reasoning
    r.first_content_ns = r.token_ns[reasoning]
    r.end_ns = r.token_ns[-1] + MS
    r.completion_tokens = len(tokens_ms)
    r.usage_reasoning_tokens = reasoning
    r.prompt_tokens = 16
    r.finish_reason = "stop"
    return r


def _level() -> dict[str, Any]:
    """One level of two requests as the sweep writes it, against a simulator at SCALE."""
    records = [_record(0, [200, 220, 240, 260], 2), _record(10, [250, 280, 300, 330, 360], 1)]
    slo = Slo.model_validate({f"{name}_ms": 10_000 for name in OBJECTIVES})
    result = summarize_level([derive(r, 0) for r in records], duration_s=1.0, slo=slo,
                             token_times_s=[0.2, 0.3], percentiles=PERCENTILES,
                             percentile_metrics=CHOOSABLE, time_scale=SCALE)
    result |= {"level": "c2", "mode": "closed", "max_concurrency": 2, "request_rate": "inf",
               "partial": False, "flags": [], "simulated": True, "time_scale": SCALE}
    # a GPU host's telemetry, and the energy figures its sampler adds to the level's
    gpus = {"source": "nvidia-smi", "samples": 5, "window_s": 1.0, "energy_j": 900.0,
            "mean_power_w": 900.0}
    result |= {"gpu_telemetry": gpus,
               **energy_figures(gpus, result["total_output_tokens"], result["duration"])}
    result["normalized"] = normalized(result, SCALE)
    return result


def test_every_metric_reaches_the_level_file_and_its_model_time() -> None:
    result = _level()
    for metric in LATENCIES:
        keys = [stat_key(s, metric.name) for s in STATS] + [percentile_stat_key(p, metric.name) for p in PERCENTILES]
        for key in keys:
            assert isinstance(result[key], float), key
            assert result["normalized"][key] == result[key] / SCALE, key
    for metric in THROUGHPUTS:
        assert isinstance(result[metric.name], float), metric.name
        assert result["normalized"][metric.name] == result[metric.name] * SCALE, metric.name
    # a count or a fraction has no model time
    assert "completed" not in result["normalized"] and "slo_attainment" not in result["normalized"]


def test_every_metric_reaches_the_csv() -> None:
    text = render_csv([LevelResult.model_validate(_level())], csv_columns(PERCENTILES))
    (row,) = csv.DictReader(io.StringIO(text))
    for metric in LATENCIES:
        assert row[stat_key("mean", metric.name)] != "", metric.name
    for name in CHOOSABLE:
        assert all(row[percentile_stat_key(p, name)] != "" for p in PERCENTILES), name
    csv_throughputs = [m.name for m in THROUGHPUTS if m.in_csv]
    assert csv_throughputs and all(row[name] != "" for name in csv_throughputs)


def test_every_metric_reaches_the_report() -> None:
    comparison = compare([run("a", levels=[_level()])])
    titles = [table.title for table in comparison_tables(comparison)]
    for metric in LATENCIES:
        assert f"{metric.title} by load" in titles, metric.name
    (level,) = comparison.to_json()["series"][0]["levels"]
    for metric in LATENCIES:
        assert set(level["percentiles"]) >= {percentile_stat_key(p, metric.name) for p in PERCENTILES}
    assert set(level["throughputs"]) == {m.name for m in THROUGHPUTS}
    # in model time, as every figure of a simulated run in the report
    assert level["throughputs"]["output_throughput"] == _level()["output_throughput"] * SCALE


def test_the_plan_choices_are_the_table_s() -> None:
    assert get_args(LatencyMetric) == CHOOSABLE
    assert tuple(Bench().percentile_metrics) == CHOOSABLE
    assert tuple(f.removesuffix("_ms") for f in Slo.model_fields if f.endswith("_ms")) == OBJECTIVES
    assert tuple(GOODPUT_KEYS) == OBJECTIVES
    assert with_percentiles(["ttft"]) == ("ttft", "ttft_content")  # computed beside it


def test_the_level_file_defines_every_latency() -> None:
    assert list(METRIC_DEFINITIONS)[: len(LATENCIES)] == [m.name for m in LATENCIES]
    assert all(m.definition and m.unit and m.title for m in METRICS)
    assert len({m.name for m in METRICS}) == len(METRICS)


def test_the_csv_columns_are_those_users_have() -> None:
    """sweep.csv's header as orch has written it: a spreadsheet reads columns by place."""
    assert ",".join(csv_columns()) == (
        "level,mode,concurrency,request_rate,partial,completed,failed,duration,output_throughput,"
        "total_token_throughput,request_throughput,request_goodput,mean_e2el_ms,median_e2el_ms,"
        "p50_e2el_ms,p90_e2el_ms,p95_e2el_ms,p99_e2el_ms,mean_ttft_ms,p50_ttft_ms,p90_ttft_ms,"
        "p95_ttft_ms,p99_ttft_ms,mean_ttft_content_ms,mean_tpot_ms,p50_tpot_ms,p90_tpot_ms,"
        "p95_tpot_ms,p99_tpot_ms,mean_itl_ms,p50_itl_ms,p90_itl_ms,p95_itl_ms,p99_itl_ms,"
        "total_output_tokens,total_reasoning_tokens,token_source,server_output_throughput,spread,"
        "client_cpu_utilization,flags,normalized_output_throughput,normalized_request_goodput,"
        "normalized_mean_e2el_ms,normalized_mean_ttft_ms,normalized_mean_itl_ms,"
        "output_tokens_per_joule,gpu_mean_power_w,gpu_energy_j"
    )
