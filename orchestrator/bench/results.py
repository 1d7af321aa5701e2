"""What a sweep's result files say beyond the raw level results: `sweep.csv`'s columns and
rows, and the figures of a simulator run in model time. The files themselves are written by
`runs/writer.py` (layout in `runs/layout.py`).

A simulator run at time scale s also gets a `normalized` block: its figures in the
model's own time (durations / s, throughputs * s). The raw measurements stay as measured.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from orchestrator import masking
from orchestrator.metrics import (
    CHOOSABLE,
    DEFAULT_PERCENTILES,
    HEADLINE,
    THROUGHPUTS,
    headline_first,
    model_time,
    percentile_stat_key,
    stat_key,
)
from orchestrator.runs.run_records import LevelResult

_HEAD = (
    "level",
    "mode",
    "concurrency",
    "request_rate",
    "partial",
    "completed",
    "failed",
    "duration",
    *(m.name for m in THROUGHPUTS if m.in_csv),
)
_TAIL = (
    "total_output_tokens",
    "total_reasoning_tokens",
    "token_source",
    "server_output_throughput",
    "spread",
    "client_cpu_utilization",
    "flags",
    "normalized_output_throughput",
    "normalized_request_goodput",
    "normalized_mean_e2el_ms",
    "normalized_mean_ttft_ms",
    "normalized_mean_itl_ms",
    # appended, so a spreadsheet's columns keep their places; empty without GPU telemetry
    "output_tokens_per_joule",
    "gpu_mean_power_w",
    "gpu_energy_j",
)


def csv_columns(
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    metrics: Sequence[str] = CHOOSABLE,
) -> list[str]:
    """sweep.csv's columns: the headline figures, then per latency its mean (and the
    headline latency's median) and the percentiles the plan chose for it, then tokens,
    server and flags. A latency the plan cannot choose (ttft_content) has its percentiles in
    the level file only: the CSV's columns are what the plan named."""
    columns = list(_HEAD)
    for metric in headline_first():
        columns.append(stat_key("mean", metric.name))
        if metric.name == HEADLINE:
            columns.append(stat_key("median", metric.name))
        if metric.name in metrics:
            columns += [percentile_stat_key(p, metric.name) for p in percentiles]
    return columns + list(_TAIL)


def normalized(result: Mapping[str, Any], time_scale: float) -> dict[str, Any]:
    """The result's durations and rates in the model's own time (time scale s)."""
    out: dict[str, Any] = {"time_scale": time_scale}
    for key, value in result.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        scaled = model_time(key, value, time_scale)
        if scaled is not None:
            out[key] = scaled
    return out


def csv_row(result: LevelResult, columns: Sequence[str]) -> dict[str, Any]:
    """One level as the CSV's row (and summary.json's `levels`): None stays None."""
    row: dict[str, Any] = {}
    norm = result.normalized or {}
    server = result.server_metrics or {}
    data = result.model_dump()
    for column in columns:
        value: Any
        if column.startswith("normalized_"):
            value = norm.get(column.removeprefix("normalized_"))
        elif column == "server_output_throughput":
            value = server.get(column)
        elif column.startswith("gpu_"):
            value = (result.extra("gpu_telemetry") or {}).get(column.removeprefix("gpu_"))
        elif column == "concurrency":
            value = result.max_concurrency
        elif column == "flags":
            value = " ".join(result.flags)
        else:
            value = data.get(column)
        if isinstance(value, float):
            value = round(value, 4)
        row[column] = value
    return row


def render_csv(results: Iterable[LevelResult], columns: Sequence[str]) -> str:
    """sweep.csv: an empty cell where a figure is null (no goodput without objectives)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for result in results:
        row = masking.mask_data(csv_row(result, columns))  # before CSV doubles a `"`
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()
