"""What changed between two resolved plans across a pivot, grouped by what it means
(pure): model, quantization, parallelism, engine, pins, env, flags, bench, other.

Maps are compared key by key (service.args flag by flag, env variable by variable, pins
package by package); lists and scalars as a whole. Two derived rows say what the raw keys
imply: the number of GPUs used (`gpus.py`) and the weight format the model name states.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.engines import engine
from orchestrator.names import flag_name
from orchestrator.plan.layers import dotted
from orchestrator.plan.models import Plan, canonical_name, parse_pin
from orchestrator.report.gpus import gpu_count
from orchestrator.tables import Column, TableData

CATEGORIES = ("model", "quantization", "parallelism", "engine", "pins", "env", "flags", "bench", "other")

QUANTIZATION_FLAGS = {"quantization", "dtype"}  # and each engine's KV cache dtype flag
PARALLELISM_ENV = {"CUDA_VISIBLE_DEVICES"}
# Weight formats a model id may name, most specific first.
_WEIGHT_FORMATS = ("nvfp4", "mxfp4", "w4a16", "w4a8", "w8a8", "int4", "int8", "fp4", "fp8", "awq", "gptq", "gguf", "bf16", "fp16")
_MAX_VALUE = 120
UNSET = "(unset)"


@dataclass(frozen=True)
class Change:
    category: str
    setting: str
    before: str | None  # None: not set in that plan
    after: str | None


def show(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, default=str)
    if len(text) > _MAX_VALUE:
        text = f"{text[: _MAX_VALUE // 2]}... ({len(text)} characters)"
    return text


def weight_format(model: str) -> str | None:
    """The weight format a model id names ('nvidia/Kimi-K2.5-NVFP4' -> 'NVFP4'), if any."""
    parts = {part.lower() for part in re.split(r"[-_/.:]", model)}
    return next((fmt.upper() for fmt in _WEIGHT_FORMATS if fmt in parts), None)


def _canonical(value: Any) -> str:
    """Type-aware equality: `true` and `1` render different flags, so they differ here."""
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class FlagGroups:
    """The `service.args` flags the two plans' engines name for quantization and parallelism."""

    quantization: frozenset[str]
    parallelism: frozenset[str]

    @classmethod
    def of(cls, *plans: Plan) -> FlagGroups:
        flags = [engine(p.service.engine).flags for p in plans if p.service is not None]
        kv = {f.kv_dtype for f in flags if f.kv_dtype}
        return cls(frozenset(QUANTIZATION_FLAGS | kv), frozenset().union(*(f.parallel() for f in flags)))


def _category(path: str, groups: FlagGroups) -> str:
    if path in ("service.model", "service.served_model_name") or path.startswith("model."):
        return "model"
    if path.startswith("service.args."):
        flag = flag_name(path.removeprefix("service.args."))
        if flag in groups.quantization:
            return "quantization"
        return "parallelism" if flag in groups.parallelism else "flags"
    if path == "service.extra_args":
        return "flags"
    if path in ("service.engine", "service.backend") or path.startswith("service.sim."):
        return "engine"
    if path.startswith("env."):
        return "parallelism" if path.removeprefix("env.") in PARALLELISM_ENV else "env"
    if path.startswith("bench."):
        return "bench"
    return "other"


def _setting(path: str) -> str:
    if path.startswith("service.args."):
        return "--" + path.removeprefix("service.args.")
    if path.startswith("env."):
        return path.removeprefix("env.")
    return path


def _pins(plan: Plan) -> dict[str, str]:
    return {canonical_name(name): version for name, version in (parse_pin(p) for p in plan.install.packages)}


def _dump(plan: Plan) -> dict[str, Any]:
    data = plan.model_dump(mode="json")
    for key in ("name", "description", "extends"):  # named in the header, not a change
        data.pop(key, None)
    data.get("install", {}).pop("packages", None)  # compared as pins
    return data


def diff_plans(a: Plan, b: Plan) -> list[Change]:
    """Every difference between `a` and `b`, by category then setting."""
    flat_a, flat_b = dotted(_dump(a)), dotted(_dump(b))
    groups = FlagGroups.of(a, b)
    changes: list[Change] = []
    for path in sorted(flat_a.keys() | flat_b.keys()):
        before, after = flat_a.get(path), flat_b.get(path)
        if _canonical(before) != _canonical(after):
            changes.append(Change(_category(path, groups), _setting(path), show(before), show(after)))
    pins_a, pins_b = _pins(a), _pins(b)
    for name in sorted(pins_a.keys() | pins_b.keys()):
        if pins_a.get(name) != pins_b.get(name):
            changes.append(Change("pins", name, pins_a.get(name), pins_b.get(name)))
    gpus_a, gpus_b = gpu_count(a, None), gpu_count(b, None)
    if gpus_a.count != gpus_b.count:
        changes.append(Change("parallelism", "GPUs used", gpus_a.describe(), gpus_b.describe()))
    formats = [weight_format(p.service.model) if p.service else None for p in (a, b)]
    if formats[0] != formats[1] and (a.service and b.service):
        shown = [f or "not named (the checkpoint's own)" for f in formats]
        changes.append(Change("quantization", "weights (from the model name)", shown[0], shown[1]))
    order = {name: index for index, name in enumerate(CATEGORIES)}
    return sorted(changes, key=lambda c: (order[c.category], c.setting))


def diff_table(a: Plan, b: Plan, changes: list[Change], *, labels: tuple[str, str] | None = None) -> TableData:
    left, right = labels or (a.name, b.name)
    table = TableData(
        f"What changed: {left} -> {right}",
        [Column("Category", priority=1), Column("Setting"), Column(left, prose=True),
         Column(right, prose=True)],
        caption=f"{left}: {a.description or a.name}\n{right}: {b.description or b.name}",
    )
    previous = None
    for change in changes:
        category = change.category if change.category != previous else ""
        previous = change.category
        table.add([category, change.setting, change.before or UNSET, change.after or UNSET])
    if not changes:
        table.add(["", "no differences", "", ""])
    return table
