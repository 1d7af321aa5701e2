"""The final table of a sweep, like the motivating run's (Concurrency, Throughput, Avg
latency, P50, P99, TTFT, ITL): data in, a rich Table out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table


def _figures(result: Mapping[str, Any], model_time: bool) -> Mapping[str, Any]:
    if model_time and result.get("normalized"):
        return {**result, **result["normalized"]}
    return result


def _load_label(result: Mapping[str, Any]) -> str:
    if result.get("mode") == "rate":
        return f"{result.get('request_rate')} req/s"
    return str(result.get("max_concurrency"))


def _seconds(ms: Any) -> str:
    return f"{ms / 1000:.2f}" if isinstance(ms, int | float) else "-"


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


def render_table(
    results: Sequence[Mapping[str, Any]],
    *,
    knee: int | None = None,
    time_scale: float | None = None,
    title: str | None = None,
) -> Table:
    """One row per level. For a simulator at time scale s (not 1), figures are given in
    the model's own time (durations / s, throughputs * s) and the caption says so."""
    model_time = time_scale is not None and time_scale != 1.0
    rate_levels = any(r.get("mode") == "rate" for r in results)
    table = Table(title=title or "Benchmark", title_justify="left")
    table.add_column("Rate / Conc." if rate_levels else "Concurrency", justify="right")
    table.add_column("Throughput (tok/s)", justify="right")
    table.add_column("Avg latency (s)", justify="right")
    table.add_column("P50 (s)", justify="right")
    table.add_column("P99 (s)", justify="right")
    table.add_column("TTFT (ms)", justify="right")
    table.add_column("ITL (ms)", justify="right")
    table.add_column("Failed", justify="right")
    table.add_column("Notes")
    for result in results:
        f = _figures(result, model_time)
        notes = list(result.get("flags", []))
        if knee is not None and result.get("mode") != "rate" and result.get("max_concurrency") == knee:
            notes.insert(0, "knee")
        table.add_row(
            _load_label(result),
            f"{f.get('output_throughput', 0.0):,.1f}",
            _seconds(f.get("mean_e2el_ms")),
            _seconds(f.get("median_e2el_ms")),
            _seconds(f.get("p99_e2el_ms")),
            _ms(f.get("mean_ttft_ms")),
            _ms(f.get("mean_itl_ms")),
            str(result.get("failed", 0)),
            ", ".join(notes),
        )
    captions = ["Throughput: all output tokens (reasoning and content) / level wall time."]
    if model_time:
        captions.append(
            f"Simulator at time scale {time_scale:g}: figures in model time "
            f"(durations / {time_scale:g}, throughputs x {time_scale:g}); raw figures in the files."
        )
    table.caption = "\n".join(captions)
    table.caption_justify = "left"
    return table
