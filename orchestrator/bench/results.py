"""What a sweep's result files say beyond the raw level results: `sweep.csv`'s columns and
rows, and the figures of a simulator run in model time. The files themselves are written by
`runs/writer.py` (layout in `runs/layout.py`).

A simulator run at time scale s also gets a `normalized` block: its figures in the
model's own time (durations / s, throughputs * s). The raw measurements stay as measured.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

THROUGHPUT_KEYS = (
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "reasoning_throughput",
    "content_throughput",
)

CSV_COLUMNS = (
    "level",
    "mode",
    "concurrency",
    "request_rate",
    "partial",
    "completed",
    "failed",
    "duration",
    "output_throughput",
    "total_token_throughput",
    "request_throughput",
    "request_goodput",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "mean_ttft_ms",
    "p99_ttft_ms",
    "mean_ttft_content_ms",
    "mean_tpot_ms",
    "mean_itl_ms",
    "p99_itl_ms",
    "total_output_tokens",
    "total_reasoning_tokens",
    "token_source",
    "server_output_throughput",
    "spread",
    "client_cpu_utilization",
    "flags",
    "normalized_output_throughput",
    "normalized_mean_e2el_ms",
    "normalized_mean_ttft_ms",
    "normalized_mean_itl_ms",
)


def normalized(result: Mapping[str, Any], time_scale: float) -> dict[str, Any]:
    """The result's durations and rates in the model's own time (time scale s)."""
    out: dict[str, Any] = {"time_scale": time_scale}
    for key, value in result.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if key.endswith("_ms") or key == "duration":
            out[key] = value / time_scale
        elif key in THROUGHPUT_KEYS:
            out[key] = value * time_scale
    return out


def csv_row(result: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    norm = result.get("normalized") or {}
    server = result.get("server_metrics") or {}
    for column in CSV_COLUMNS:
        if column.startswith("normalized_"):
            value = norm.get(column.removeprefix("normalized_"))
        elif column == "server_output_throughput":
            value = server.get(column)
        elif column == "concurrency":
            value = result.get("max_concurrency")
        elif column == "flags":
            value = " ".join(result.get("flags", []))
        else:
            value = result.get(column)
        if isinstance(value, float):
            value = round(value, 4)
        row[column] = "" if value is None else value
    return row


def render_csv(results: Iterable[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for result in results:
        writer.writerow(csv_row(result))
    return buffer.getvalue()
