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

from orchestrator.bench.stats import percentile_key
from orchestrator.plan.models import DEFAULT_PERCENTILES

THROUGHPUT_KEYS = (
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "reasoning_throughput",
    "content_throughput",
)

_HEAD = (
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
)


def csv_columns(
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    metrics: Sequence[str] = ("ttft", "tpot", "itl", "e2el"),
) -> list[str]:
    """sweep.csv's columns: the headline figures, then per latency metric its mean (and
    median for e2el) and the chosen percentiles, then tokens, server and flags."""
    columns = list(_HEAD)
    for metric in ("e2el", "ttft", "ttft_content", "tpot", "itl"):
        columns.append(f"mean_{metric}_ms")
        if metric == "e2el":
            columns.append("median_e2el_ms")
        if metric in metrics:
            columns += [f"{percentile_key(p)}_{metric}_ms" for p in percentiles]
    return columns + list(_TAIL)


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


def csv_row(result: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """One level as the CSV's row (and summary.json's `levels`): None stays None."""
    row: dict[str, Any] = {}
    norm = result.get("normalized") or {}
    server = result.get("server_metrics") or {}
    for column in columns:
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
        row[column] = value
    return row


def render_csv(results: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """sweep.csv: an empty cell where a figure is null (no goodput without objectives)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for result in results:
        writer.writerow({k: "" if v is None else v for k, v in csv_row(result, columns).items()})
    return buffer.getvalue()
