"""Result files of a sweep: one JSON per level, `sweep.csv`, `requests-<level>.jsonl` and
`summary.json`. Every text written here passes through `mask()`.

A simulator run at time scale s also gets a `normalized` block: its figures in the
model's own time (durations / s, throughputs * s). The raw measurements stay as measured.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import BenchError
from orchestrator.masking import mask

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


def _write(path: Path, text: str) -> None:
    """Write atomically (temporary file, then rename), masked."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(mask(text), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:
        raise BenchError(f"cannot write {path}: {error.strerror or error}") from None


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str, allow_nan=False) + "\n"


def level_filename(label: str) -> str:
    return f"level-{label}.json"


def write_level(out_dir: Path, label: str, result: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
    _write(out_dir / level_filename(label), _json(_finite(result)))
    lines = "".join(json.dumps(_finite(row), default=str) + "\n" for row in rows)
    _write(out_dir / f"requests-{label}.jsonl", lines)


def write_sweep(out_dir: Path, results: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    _write(out_dir / "sweep.csv", render_csv(results))
    _write(out_dir / "summary.json", _json(_finite(summary)))


def ensure_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BenchError(f"cannot create the output folder {out_dir}: {error.strerror or error}") from None


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
