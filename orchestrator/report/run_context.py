"""What each run sent and where it ran, for the report: the benchmark settings side by side
and the host facts (one table per distinct machine, so three runs on one host show it once)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import MISSING
from orchestrator.report.series import Series
from orchestrator.tables import Column, TableData, text, to_html

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


def host_groups(series: Sequence[Series]) -> list[tuple[str, dict[str, Any] | None, list[str]]]:
    """(host name, facts, labels of the runs that ran there): one entry per distinct machine,
    so three runs on one host show its facts once."""
    groups: dict[str, tuple[str, dict[str, Any] | None, list[str]]] = {}
    for s in series:
        facts = s.host.facts
        stable = json.dumps({k: (facts or {}).get(k) for k in STABLE_FACTS}, sort_keys=True, default=str)
        key = f"{s.host.name}\0{stable}"
        groups.setdefault(key, (s.host.name, facts, []))[2].append(s.label)
    return list(groups.values())


def host_facts_html(name: str, facts: dict[str, Any] | None, labels: list[str]) -> str:
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
