"""The final table of a sweep, like the motivating run's (Concurrency, Throughput, Avg
latency, P50, P99, TTFT, ITL), with every latency percentile the levels carry and goodput
when objectives were given: data in, `TableData` out (tables.py fits it to the terminal:
the P90/P95 columns go first at 80 columns, then the others of lower priority)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.bench.anomalies import capped
from orchestrator.bench.fleet_table import CAPTION as FLEET_CAPTION
from orchestrator.bench.fleet_table import fleet_notes, has_fleet, replica_cell
from orchestrator.runs.run_records import LevelResult
from orchestrator.tables import Column, TableData

_PERCENTILE = re.compile(r"^p(\d+(?:\.\d+)?)_e2el_ms$")


def _load_label(result: LevelResult) -> str:
    if result.mode == "rate":
        return f"{result.request_rate} req/s"
    return str(result.max_concurrency)


def _seconds(ms: Any) -> str:
    return f"{ms / 1000:.2f}" if isinstance(ms, int | float) else "-"


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


_SHORT = {"throughput_drop": "drop", "client_saturated": "client CPU",
          "server_disagrees": "server differs", "serialized": "one at a time",
          "no_scaling": "no gain from concurrency", "gpu_throttled": "GPU throttled",
          "latency_unreliable": "latencies unreliable: the client ran late",
          "itl_batched": "ITL unreliable: chunks read in batches"}
_SOURCES = {"counted": "tokens counted from chunks", "tokenizer": "tokens by the tokenizer",
            "mixed": "tokens partly counted"}


def _notes(result: LevelResult, knee: int | None) -> str:
    notes = []
    if knee is not None and result.mode != "rate" and result.max_concurrency == knee:
        notes.append("knee")
    if result.failed:
        top = (result.error_messages or [{}])[0]
        said = f" ({top['message'][:80]})" if top.get("message") else ""
        notes.append(f"{result.failed} failed{said}")
    if result.retried:
        notes.append(f"{result.retried} retried (keep-alive closed)")
    notes += fleet_notes(result)
    if result.completed and result.token_source in _SOURCES:
        notes.append(_SOURCES[result.token_source])
    notes += [capped(result) or flag if flag == "capped" else _SHORT.get(flag, flag)
              for flag in result.flags if flag != "errors"]
    name = (result.limiter or {}).get("name")
    if isinstance(name, str) and name != "not-enough-evidence":  # no verdict: nothing to say
        notes.append(name)
    return ", ".join(notes)


def percentiles_of(results: Sequence[LevelResult]) -> list[str]:
    """The latency percentiles the levels carry (`90`, `99.9`), in order; always 50, which
    the median gives when a level has no p50."""
    found = {m.group(1) for r in results for key in r.names() if (m := _PERCENTILE.match(key))}
    return sorted(found | {"50"}, key=float)


def render_table(
    results: Sequence[LevelResult],
    *,
    knee: int | None = None,
    time_scale: float | None = None,
    title: str | None = None,
) -> TableData:
    """One row per level. For a simulator at time scale s (not 1), figures are given in
    the model's own time (durations / s, throughputs * s) and the caption says so."""
    model_time = time_scale is not None and time_scale != 1.0
    shown = _Shown(
        percentiles=percentiles_of(results),
        goodput=any(r.request_goodput is not None for r in results),
        energy=any(r.figure("output_tokens_per_joule") is not None for r in results),
        fleet=has_fleet(results),
        notes=[_notes(r, knee) for r in results],
        model_time=model_time,
    )
    table = TableData(title or "Benchmark", _columns(results, shown),
                      caption="\n".join(_captions(results, shown, time_scale)))
    for result, notes in zip(results, shown.notes, strict=True):
        table.add(_row(result, notes, shown))
    return table


@dataclass(frozen=True)
class _Shown:
    """What the table shows beyond the fixed columns, decided over all its levels."""

    percentiles: list[str]
    goodput: bool
    energy: bool
    fleet: bool  # through vLLM's router: a column of requests per replica
    notes: list[str]  # per level
    model_time: bool


def _columns(results: Sequence[LevelResult], shown: _Shown) -> list[Column]:
    rate_levels = any(r.mode == "rate" for r in results)
    columns = [Column("Rate / Conc." if rate_levels else "Concurrency", "right"),
               Column("Throughput (tok/s)", "right"), Column("Avg latency (s)", "right")]
    # P50 and P99 stay longest; the ones between go first when the terminal is narrow
    columns += [Column(f"P{p} (s)", "right", priority=1 if p in ("50", "99") else 2)
                for p in shown.percentiles]
    columns += [Column("TTFT (ms)", "right", priority=1), Column("ITL (ms)", "right", priority=1)]
    if shown.goodput:
        columns.append(Column("Goodput (req/s)", "right", priority=1))
    if shown.energy:
        columns += [Column("tok/J", "right", priority=1), Column("GPU W", "right", priority=2)]
    if shown.fleet:
        columns.append(Column("Per replica", "right"))
    if any(shown.notes):
        columns.append(Column("Notes", prose=True))
    return columns


def _captions(results: Sequence[LevelResult], shown: _Shown,
              time_scale: float | None) -> list[str]:
    captions = ["Throughput: all output tokens (reasoning and content) / wall time. "
                "P50..P99: end-to-end latency percentiles."]
    if shown.goodput:
        captions.append("Goodput: requests per second meeting every latency objective.")
    if shown.energy:
        captions.append("tok/J: output tokens per joule the GPUs drew during the level "
                        "(their power draw, integrated); GPU W: their mean total power.")
    if any(r.prompt_prefix == "shared" for r in results):
        captions.append("Prompts: the same for every request (--prompt-prefix shared): the "
                        "server's prefix cache may serve most of each prefill.")
    if results and all((r.server_metrics or {}).get("source") == "none" for r in results):
        captions.append("The server exports no counters orch knows (vllm:, llamacpp:): no "
                        "server-side cross-check.")
    if any(r.keep_alive is False for r in results):
        captions.append("The server closes a kept-alive connection after each answer: orch "
                        "then opened a new one per request (its connect is part of TTFT).")
    if shown.fleet:
        captions.append(FLEET_CAPTION)
    if shown.model_time:
        captions.append(
            f"Simulator at time scale {time_scale:g}: figures in model time "
            f"(durations / {time_scale:g}, throughputs x {time_scale:g}); raw figures in the files.")
    return captions


def _row(result: LevelResult, notes: str, shown: _Shown) -> list[str]:
    def f(name: str) -> float | None:
        if result.completed == 0:
            return None  # nothing finished: no figure to show, not zeros
        return result.figure(name, model_time=shown.model_time)

    throughput = f("output_throughput")
    row = [
        _load_label(result),
        f"{throughput:,.1f}" if throughput is not None else "-",
        _seconds(f("mean_e2el_ms")),
        *(_seconds(f("median_e2el_ms") if p == "50" and f(f"p{p}_e2el_ms") is None
                   else f(f"p{p}_e2el_ms")) for p in shown.percentiles),
        _ms(f("mean_ttft_ms")),
        _ms(f("mean_itl_ms")),
    ]
    if shown.goodput:
        value = f("request_goodput")
        row.append(f"{value:,.2f}" if isinstance(value, int | float) else "-")
    if shown.energy:
        value = f("output_tokens_per_joule")
        power = (result.extra("gpu_telemetry") or {}).get("mean_power_w")
        row += [f"{value:,.3f}" if value is not None else "-",
                f"{power:,.0f}" if isinstance(power, int | float) else "-"]
    if shown.fleet:
        row.append(replica_cell(result))
    if any(shown.notes):
        row.append(notes)
    return row
