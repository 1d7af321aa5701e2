"""The final table of a sweep, like the motivating run's (Concurrency, Throughput, Avg
latency, P50, P99, TTFT, ITL): data in, a rich Table out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
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


_SHORT = {"throughput_drop": "drop", "client_saturated": "client CPU", "server_disagrees": "server differs"}


def _notes(result: Mapping[str, Any], knee: int | None) -> str:
    notes = []
    if knee is not None and result.get("mode") != "rate" and result.get("max_concurrency") == knee:
        notes.append("knee")
    if result.get("failed"):
        notes.append(f"{result['failed']} failed")
    notes += [_SHORT.get(flag, flag) for flag in result.get("flags", []) if flag != "errors"]
    return ", ".join(notes)


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
    table = Table(title=title or "Benchmark", title_justify="left", box=box.SIMPLE_HEAD)
    # two-line headers keep the table within 80 columns
    table.add_column("Rate /\nConc." if rate_levels else "Concurrency", justify="right", no_wrap=True)
    for header in ("Throughput\n(tok/s)", "Avg\nlatency (s)", "P50\n(s)", "P99\n(s)", "TTFT\n(ms)", "ITL\n(ms)"):
        table.add_column(header, justify="right", no_wrap=True)
    notes_of = [_notes(r, knee) for r in results]
    if any(notes_of):
        table.add_column("Notes", overflow="fold", min_width=8)
    for result, notes in zip(results, notes_of, strict=True):
        f = _figures(result, model_time)
        if result.get("completed") == 0:
            f = {}  # nothing finished: no figure to show, not zeros
        row = [
            _load_label(result),
            f"{f['output_throughput']:,.1f}" if "output_throughput" in f else "-",
            _seconds(f.get("mean_e2el_ms")),
            _seconds(f.get("median_e2el_ms")),
            _seconds(f.get("p99_e2el_ms")),
            _ms(f.get("mean_ttft_ms")),
            _ms(f.get("mean_itl_ms")),
        ]
        if any(notes_of):
            row.append(notes)
        table.add_row(*row)
    captions = ["Throughput: all output tokens (reasoning and content) / wall time."]
    if model_time:
        captions.append(
            f"Simulator at time scale {time_scale:g}: figures in model time\n"
            f"(durations / {time_scale:g}, throughputs x {time_scale:g}); raw figures in the files."
        )
    table.caption = "\n".join(captions)
    table.caption_justify = "left"
    return table
