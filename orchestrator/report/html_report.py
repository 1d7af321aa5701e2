"""`orch report`: one self-contained HTML page of a comparison (or of a matrix run).

Tables, plots (PNG as `data:` URIs), the per-request distributions, the server's view per
level and through each run's knee level (with the load asked against the load run), the GPU
telemetry and energy, the plan diffs between consecutive runs, the benchmark settings and
the host facts. A matrix run gets a section of its own first: its variants, the best for
its objective and why, and a plot per metric with a line per variant.
Inline CSS, no script, no external request of any kind: the file can be mailed, archived or
opened offline. Every piece of text is masked and escaped (`tables.text`); the page as a
whole is not masked, so a secret can never corrupt an image.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
from collections.abc import Sequence
from pathlib import Path

from orchestrator import __version__, local_files
from orchestrator.errors import OrchError
from orchestrator.report.compare_tables import captions, comparison_tables
from orchestrator.report.comparison import Comparison
from orchestrator.report.distributions import KNEE
from orchestrator.report.effective_table import effective_table
from orchestrator.report.gpu_levels import gpu_table, telemetry_notes
from orchestrator.report.knee_timeline import knee_timelines
from orchestrator.report.matrix import MatrixComparison, matrix_table, reasons
from orchestrator.report.matrix_plots import matrix_plots
from orchestrator.report.plan_diff import diff_plans, diff_table
from orchestrator.report.plateaus import plateau_html
from orchestrator.report.plots import Plot, comparison_plots
from orchestrator.report.run_context import host_facts_html, host_groups, settings_table
from orchestrator.tables import Column, TableData, split_groups, text, text_width, to_html

STYLE = """
:root { --ink: #1d2430; --muted: #5b6474; --line: #d9dee7; --band: #f5f7fa; --accent: #0072b2;
        --warn-bg: #fff7e0; --warn-line: #e6b800; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; color: var(--ink); background: #fff;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1280px; margin: 0 auto; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.meta, p.caption, figcaption { color: var(--muted); font-size: 12.5px; white-space: pre-line; }
.warnings { background: var(--warn-bg); border-left: 4px solid var(--warn-line); padding: 8px 12px 8px 28px; }
.warnings li { margin: 3px 0; }
.ok { color: #1b7f3b; }
.table-wrap { overflow-x: auto; margin: 10px 0 18px; }
.table-row { display: flex; flex-wrap: wrap; column-gap: 28px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 0 0 6px; }
th, td { border: 1px solid var(--line); padding: 4px 9px; vertical-align: top; }
th { background: var(--band); font-weight: 600; }
th.group { text-align: center; color: var(--accent); }
td.right, th.right { text-align: right; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fafbfd; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; margin: 10px 0 18px; }
figure { margin: 0; border: 1px solid var(--line); padding: 8px; background: #fff; }
figure.wide { grid-column: 1 / -1; }
figure img { width: 100%; height: auto; display: block; }
pre { background: var(--band); padding: 8px; overflow-x: auto; font-size: 12px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
"""


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


# Wider than this (in characters), a table with column groups is shown as one table per
# group, side by side: P50, P90 and P99 of three runs would not fit the page as one.
MAX_TABLE_CHARS = 140


def _tables(tables: Sequence[TableData]) -> str:
    parts = []
    for table in tables:
        pieces = split_groups(table) if text_width(table) > MAX_TABLE_CHARS else [table]
        if len(pieces) == 1:
            parts.append(to_html(table))
        else:
            parts.append(f'<div class="table-row">{"".join(to_html(piece) for piece in pieces)}</div>')
    return "".join(parts)


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{text(title)}</h2>{body}</section>'


def _warnings(comparison: Comparison) -> str:
    if not comparison.warnings:
        return '<p class="ok">No comparability problems found: same benchmark settings, engine and kind of result.</p>'
    items = "".join(f"<li>{text(w)}</li>" for w in comparison.warnings)
    return f'<ul class="warnings">{items}</ul>'


# Plots shown in a section of their own; the rest go under "Plots".
OWN_SECTION = ("cdf", "server", "energy", "timeline")
ENERGY_TABLE = "Energy by load"  # orch compare's table (energy_table.py): in the GPU section here


def _figure(plot: Plot) -> str:
    wide = ' class="wide"' if plot.wide else ""
    return (
        f'<figure{wide}><img src="{_data_uri(plot.png)}" alt="{text(plot.title)}">'
        f"<figcaption>{text(plot.title)}</figcaption></figure>"
    )


def _plots(plots: Sequence[Plot]) -> str:
    return f'<div class="plots">{"".join(_figure(p) for p in plots)}</div>'


def _distributions(comparison: Comparison, plots: Sequence[Plot]) -> str:
    if not comparison.distributions:
        return "<p>No per-request file (requests-&lt;level&gt;.jsonl) in these runs.</p>"
    table = TableData(
        "Where each run's distribution comes from",
        [Column("Run"), Column("Level", "right"), Column("Why this level", prose=True),
         Column("Requests", "right"), Column("Failed (left out)", "right")],
        caption="Each run at its knee, where its throughput stops growing with the load; at its highest "
        "level when it has no knee (still rising) or the knee's level was not measured.",
    )  # fmt: skip
    for d in comparison.distributions:
        why = "its knee" if d.basis == KNEE else "its highest level"
        table.add([d.label, d.where, why, f"{len(d.e2el_ms):,}", f"{d.failed:,}"])
    return _plots([p for p in plots if p.name == "cdf"]) + to_html(table)


def _server(comparison: Comparison, plots: Sequence[Plot]) -> str:
    shown = [p for p in plots if p.name == "server"]
    if not shown:
        return "<p>No server metrics in these runs (<code>bench.metrics_interval: null</code>, or /metrics did not answer).</p>"
    note = (
        "<p class=\"caption\">Scraped from the server's /metrics at each level's start and end and every "
        "<code>metrics_interval</code> during it. KV-cache usage near 100%, waiting requests and preemptions "
        "say why throughput stops growing.</p>"
    )
    parts = [_plots(shown), note]
    timeline = [p for p in plots if p.name == "timeline"]
    if timeline:
        levels = "; ".join(f"{t.label}: {t.level} ({'its knee' if t.basis == KNEE else 'its highest level'})"
                           for t in knee_timelines(comparison))
        caption = ("The same gauges sample by sample through one level of each run (the dotted line: the "
                   "concurrency asked), and the power all its GPUs drew where they were sampled. " + levels)
        parts += [f"<h3>{text('Through the knee level, over time')}</h3>", _plots(timeline),
                  f'<p class="caption">{text(caption)}</p>']
    effective = effective_table(comparison)
    if effective is not None:
        parts.append(to_html(effective))
    return "".join(parts)


def _gpus(comparison: Comparison, energy: Sequence[TableData], plots: Sequence[Plot]) -> str:
    notes = telemetry_notes(comparison.series)
    table = gpu_table(comparison)
    parts = []
    if table is None:
        parts.append("<p>No GPU telemetry in these runs (<code>bench.gpu_telemetry</code> samples nvidia-smi "
                     "on the host during every level).</p>")
    else:
        parts += [_tables(energy), _plots([p for p in plots if p.name == "energy"]), to_html(table)]
    if notes:
        parts.append("<ul>" + "".join(f"<li>{text(n)}</li>" for n in notes) + "</ul>")
    return "".join(parts)


def _matrix(matrix: MatrixComparison) -> str:
    best = matrix.best_line()
    lines = "".join(f"<li>{text(line)}</li>" for line in reasons(matrix))
    return (f"<p><strong>{text(best)}</strong></p>{to_html(matrix_table(matrix))}<ul>{lines}</ul>"
            + _plots(matrix_plots(matrix)))


def _diffs(comparison: Comparison) -> str:
    parts: list[str] = []
    series = comparison.series
    for before, after in itertools.pairwise(series):
        if before.run.path == after.run.path:
            continue
        if before.run.plan is None or after.run.plan is None:
            missing = before if before.run.plan is None else after
            parts.append(f"<p>{text(f'{missing.label}: no readable plan.yaml; no diff.')}</p>")
            continue
        changes = diff_plans(before.run.plan, after.run.plan)
        parts.append(to_html(diff_table(before.run.plan, after.run.plan, changes, labels=(before.label, after.label))))
    return "".join(parts) or "<p>One run: nothing to diff.</p>"


def _definitions(comparison: Comparison) -> str:
    for s in comparison.series:
        levels = s.host.bench.levels if s.host.bench else []
        definitions = next((lv.metric_definitions for lv in levels if lv.metric_definitions), None)
        if definitions:
            items = "".join(f"<li><code>{text(k)}</code>: {text(str(v))}</li>" for k, v in definitions.items())
            return f"<ul>{items}</ul>"
    return "<p>No metric definitions recorded.</p>"


def render_report(comparison: Comparison, plots: Sequence[Plot], *, generated: str | None = None,
                  matrix: MatrixComparison | None = None) -> str:
    """The whole page as text (a matrix run's when `matrix` is given: its section first)."""
    names = " vs ".join(s.label for s in comparison.series)
    if matrix is not None:
        varying = ", ".join(key.rsplit(".", 1)[-1] for key in matrix.record.varying)
        names = f"Matrix {matrix.record.plan}: {len(matrix.results)} variants" + (f" of {varying}" if varying else "")
    stamp = generated or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    tables = comparison_tables(comparison)
    summary, rest = tables[:3], tables[3:]  # the runs, the headline, why each plateaus
    levels = [t for t in rest if t.title != ENERGY_TABLE]
    energy = [t for t in rest if t.title == ENERGY_TABLE]
    body = [
        f"<header><h1>{text(names)}</h1>",
        f'<p class="meta">{text(f"Generated {stamp} by orch {__version__}. {captions(comparison)}")}</p></header>',
    ]
    if matrix is not None:
        body.append(_section("matrix", "Matrix", _matrix(matrix)))
    body += [
        _section("warnings", "Comparability", _warnings(comparison)),
        _section("summary", "Summary", _tables(summary) + plateau_html(comparison.series)),
        _section("plots", "Plots", _plots([p for p in plots if p.name not in OWN_SECTION])),
        _section("levels", "By load level", _tables(levels)),
        _section("distributions", "Per-request distributions", _distributions(comparison, plots)),
        _section("server", "The server's view", _server(comparison, plots)),
        _section("gpus", "GPU telemetry and energy", _gpus(comparison, energy, plots)),
        _section("diff", "What changed between the plans", _diffs(comparison)),
        _section("settings", "Benchmark settings", to_html(settings_table(comparison))),
        _section("hosts", "Host facts", "".join(host_facts_html(*group) for group in host_groups(comparison.series))),
        _section("definitions", "Metric definitions", _definitions(comparison)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text('orch report: ' + names)}</title><style>{STYLE}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>\n"
    )


def default_report_path(root: Path, comparison: Comparison) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    names = "-vs-".join(dict.fromkeys(s.run.name for s in comparison.series))
    if len(names) > 80:
        names = names[:80]
    return root / "reports" / f"{stamp}-{names}.html"


def write_report(comparison: Comparison, out: Path, *, matrix: MatrixComparison | None = None) -> Path:
    """Render the page (plots included) and write it atomically to `out`."""
    page = render_report(comparison, comparison_plots(comparison), matrix=matrix)
    try:
        local_files.write_atomic(out, page)
    except OSError as error:
        raise OrchError(f"cannot write the report {out}: {error.strerror or error}") from None
    return out
