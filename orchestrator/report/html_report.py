"""`orch report`: one self-contained HTML page of a comparison.

Tables, plots (PNG as `data:` URIs), the plan diffs between consecutive runs, the benchmark
settings and the host facts. Inline CSS, no script, no external request of any kind: the
file can be mailed, archived or opened offline. Every piece of text is masked and escaped
(`tabular.text`); the page as a whole is not masked, so a secret can never corrupt an image.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.errors import OrchError
from orchestrator.report.compare_tables import MISSING, captions, comparison_tables
from orchestrator.report.comparison import Comparison
from orchestrator.report.plan_diff import diff_plans, diff_table
from orchestrator.report.plots import Plot, comparison_plots
from orchestrator.report.series import Series
from orchestrator.report.tabular import Column, TableData, text, to_html

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
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 0 0 6px; }
th, td { border: 1px solid var(--line); padding: 4px 9px; vertical-align: top; }
th { background: var(--band); font-weight: 600; }
th.group { text-align: center; color: var(--accent); }
td.right, th.right { text-align: right; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fafbfd; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); padding: 8px; background: #fff; }
figure img { width: 100%; height: auto; display: block; }
pre { background: var(--band); padding: 8px; overflow-x: auto; font-size: 12px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
"""


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{text(title)}</h2>{body}</section>'


def _warnings(comparison: Comparison) -> str:
    if not comparison.warnings:
        return '<p class="ok">No comparability problems found: same benchmark settings, engine and kind of result.</p>'
    items = "".join(f"<li>{text(w)}</li>" for w in comparison.warnings)
    return f'<ul class="warnings">{items}</ul>'


def _plots(plots: Sequence[Plot]) -> str:
    figures = "".join(
        f'<figure><img src="{_data_uri(p.png)}" alt="{text(p.title)}"><figcaption>{text(p.title)}</figcaption></figure>'
        for p in plots
    )
    return f'<div class="plots">{figures}</div>'


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


SETTINGS = (
    ("endpoint", "Endpoint"),
    ("prompt", "Prompt"),
    ("dataset", "Dataset"),
    ("input_len", "Synthetic input tokens"),
    ("max_tokens", "max_tokens"),
    ("mode", "Load mode"),
    ("concurrency", "Concurrency levels"),
    ("rate", "Rates (req/s)"),
    ("requests_per_level", "Requests per level"),
    ("warmup", "Warm-up requests"),
    ("repeats", "Repeats"),
    ("temperature", "Temperature"),
    ("thinking", "Thinking"),
    ("ignore_eos", "ignore_eos"),
)


def _show(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def settings_table(comparison: Comparison) -> TableData:
    table = TableData("What each run sent", [Column("Setting")] + [Column(s.label) for s in comparison.series])
    for key, title in SETTINGS:
        values = [_show(s.config.get(key)) for s in comparison.series]
        if any(v != MISSING for v in values):
            table.add([title, *values])
    table.add(["Run folder", *[str(s.run.path) for s in comparison.series]])
    return table


def _gib(value: Any) -> str:
    return f"{value / 2**30:,.1f} GiB" if isinstance(value, int | float) else MISSING


STABLE_FACTS = ("hostname", "os", "kernel", "arch", "cpu_model", "cpu_count", "memory_bytes", "gpus", "topology")


def _host_groups(series: Sequence[Series]) -> list[tuple[str, dict[str, Any] | None, list[str]]]:
    """(host name, facts, labels of the runs that ran there): one entry per distinct machine,
    so three runs on one host show its facts once."""
    groups: dict[str, tuple[str, dict[str, Any] | None, list[str]]] = {}
    for s in series:
        facts = s.host.facts
        stable = json.dumps({k: (facts or {}).get(k) for k in STABLE_FACTS}, sort_keys=True, default=str)
        key = f"{s.host.name}\0{stable}"
        groups.setdefault(key, (s.host.name, facts, []))[2].append(s.label)
    return list(groups.values())


def _host_facts(name: str, facts: dict[str, Any] | None, labels: list[str]) -> str:
    title = f"host {name} ({', '.join(labels)})"
    if not facts:
        return f"<h3>{text(title)}</h3><p>No facts recorded.</p>"
    table = TableData(title, [Column("Fact"), Column("Value")])
    for key, label in (("hostname", "Hostname"), ("os", "OS"), ("kernel", "Kernel"), ("arch", "Architecture"),
                       ("cpu_model", "CPU"), ("cpu_count", "CPU threads"), ("python", "Python")):  # fmt: skip
        if facts.get(key) not in (None, ""):
            table.add([label, str(facts[key])])
    table.add(["Memory", _gib(facts.get("memory_bytes"))])
    gpus = facts.get("gpus")
    table.add(["GPUs", "none found (no nvidia-smi)" if not gpus else str(len(gpus))])
    parts = [to_html(table)]
    if gpus:
        gpu_table = TableData(
            f"{name}: GPUs",
            [
                Column("Index", "right"),
                Column("Name"),
                Column("Memory (MiB)", "right"),
                Column("Driver"),
                Column("Compute capability"),
                Column("PCI bus"),
            ],
        )
        for gpu in gpus:
            gpu_table.add([_show(gpu.get(k)) for k in ("index", "name", "memory_mib", "driver", "compute_cap", "pci_bus_id")])
        parts.append(to_html(gpu_table))
    if facts.get("topology"):
        parts.append(f"<pre>{text(str(facts['topology']))}</pre>")
    return "".join(parts)


def _definitions(comparison: Comparison) -> str:
    for s in comparison.series:
        levels = s.host.bench.levels if s.host.bench else []
        definitions = next((lv.metric_definitions for lv in levels if lv.metric_definitions), None)
        if definitions:
            items = "".join(f"<li><code>{text(k)}</code>: {text(str(v))}</li>" for k, v in definitions.items())
            return f"<ul>{items}</ul>"
    return "<p>No metric definitions recorded.</p>"


def render_report(comparison: Comparison, plots: Sequence[Plot], *, generated: str | None = None) -> str:
    """The whole page as text."""
    names = " vs ".join(s.label for s in comparison.series)
    stamp = generated or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    tables = comparison_tables(comparison)
    summary, levels = tables[:2], tables[2:]
    body = [
        f"<header><h1>{text(names)}</h1>",
        f'<p class="meta">{text(f"Generated {stamp} by orch {__version__}. {captions(comparison)}")}</p></header>',
        _section("warnings", "Comparability", _warnings(comparison)),
        _section("summary", "Summary", "".join(to_html(t) for t in summary)),
        _section("plots", "Plots", _plots(plots)),
        _section("levels", "By load level", "".join(to_html(t) for t in levels)),
        _section("diff", "What changed between the plans", _diffs(comparison)),
        _section("settings", "Benchmark settings", to_html(settings_table(comparison))),
        _section("hosts", "Host facts", "".join(_host_facts(*group) for group in _host_groups(comparison.series))),
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


def write_report(comparison: Comparison, out: Path) -> Path:
    """Render the page (plots included) and write it atomically to `out`."""
    page = render_report(comparison, comparison_plots(comparison))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        temporary = out.with_name(f".{out.name}.tmp")
        temporary.write_text(page, encoding="utf-8")
        os.replace(temporary, out)
    except OSError as error:
        raise OrchError(f"cannot write the report {out}: {error.strerror or error}") from None
    return out
