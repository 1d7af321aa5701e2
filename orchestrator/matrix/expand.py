"""A plan's matrix made into variants: each one the plan with its values `--set`, loaded and
compiled like any plan before anything runs, and put in the order that installs and
restarts least.

A variant's values become `--set PATH=VALUE` arguments after the command line's own (and a
last `--set matrix=null`), so a variant is exactly what `orch apply PLAN --set ...` would
apply, and its run folder's meta.json names those layers. An invalid combination is one
PlanError that names the variant, points at the matrix axis and says what the plan loader
or compiler said.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import PlanError
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.plan.meaning import sections_of
from orchestrator.plan.models import Plan
from orchestrator.plan.models.matrix import MAX_VARIANTS, canonical, dotted_key
from orchestrator.plan.models.objective import Objective, parse_objective

Values = dict[str, Any]  # axis (dotted, --set syntax) -> value


@dataclass(frozen=True)
class Variant:
    index: int  # 1-based, in the order the matrix writes them (the product, then include)
    values: Values  # what this variant sets
    loaded: LoadedPlan

    @property
    def plan(self) -> Plan:
        return self.loaded.plan

    @property
    def sets(self) -> list[str]:
        return variant_sets(self.values)


@dataclass(frozen=True)
class MatrixPlan:
    base: LoadedPlan  # the plan as written (with its matrix)
    axes: list[str]  # every key any variant sets, in the order written
    variants: list[Variant]  # in the order written
    objective: Objective | None

    @property
    def name(self) -> str:
        return self.base.plan.name

    @property
    def varying(self) -> list[str]:
        """The axes whose value differs between the variants (they label them)."""
        return varying(self.axes, [v.values for v in self.variants])

    def label(self, variant: Variant) -> str:
        """The variant's values that vary; its number too when another variant's values
        read the same (1 and "1", two long values alike up to where they are cut)."""
        keys = self.varying
        text = label(variant.values, keys)
        alike = [v for v in self.variants if label(v.values, keys) == text]
        return text if len(alike) <= 1 else f"{text} (variant {variant.index})"


def variant_sets(values: Values) -> list[str]:
    """The --set arguments of a variant: a value as JSON (which is YAML), then the matrix
    deleted, so the variant's own plan has none."""
    return [f"{key}={json.dumps(value)}" for key, value in values.items()] + ["matrix=null"]


def short(key: str, keys: Sequence[str]) -> str:
    """An axis as a label names it: its last segment (`max-num-seqs`), unless another axis
    ends the same way."""
    last = canonical(key)[-1]
    clash = [k for k in keys if canonical(k)[-1] == last]
    return last if len(clash) <= 1 else key


def label(values: Values, keys: Sequence[str]) -> str:
    """`max-num-seqs=64 kv-cache-dtype=fp8`: the values of `keys` (a key the variant does not
    set is the plan's own: `(plan)`)."""
    parts = []
    for key in keys:
        shown = shown_value(values[key]) if key in values else "(plan)"
        parts.append(f"{short(key, keys)}={shown}")
    return " ".join(parts) or "the plan"


LABEL_VALUE = 48  # characters of a value a label shows


def shown_value(value: Any) -> str:
    """A value as a label shows it: text as it is when it prints as one word, else as JSON
    (a line break, a NUL, a space are escaped and quoted); a long one cut in the middle."""
    plain = isinstance(value, str) and value.isprintable() and value and " " not in value
    return _cut(str(value) if plain else json.dumps(value))


def _cut(text: str) -> str:
    return f"{text[:LABEL_VALUE - 13]}...{text[-10:]}" if len(text) > LABEL_VALUE else text


def varying(axes: Sequence[str], all_values: Sequence[Values]) -> list[str]:
    def shown(values: Values, key: str) -> str:
        return json.dumps(values.get(key, "\0plan"), sort_keys=True)

    out = [key for key in axes if len({shown(v, key) for v in all_values}) > 1]
    return out or list(axes[:1])


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def combinations(axes: dict[tuple[str, ...], list[Any]], include: list[dict[str, Any]],
                 exclude: list[dict[str, Any]]) -> list[Values]:
    """The product of the axes, less what `exclude` names, with `include` (as a CI matrix:
    an entry adds its other values to every combination that has its axis values, and is a
    combination of its own when none has them)."""
    keys = [dotted_key(path) for path in axes]
    product = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes.values())]
    if not axes:
        product = []

    def entry(raw: dict[str, Any]) -> Values:
        return {dotted_key(canonical(k)): v for k, v in raw.items()}

    for index, raw in enumerate(exclude):
        wanted = entry(raw)
        kept = [c for c in product if not all(_same(c.get(k), v) for k, v in wanted.items())]
        if len(kept) == len(product):
            raise _shape_error(("exclude", index), "this exclude entry matches no variant "
                               "(a value not among its axis's values?)")
        product = kept
    originals = list(product)
    for raw in include:
        wanted = entry(raw)
        on_axes = {k: v for k, v in wanted.items() if k in keys}
        extra = {k: v for k, v in wanted.items() if k not in keys}
        matched = [c for c in originals if all(_same(c.get(k), v) for k, v in on_axes.items())]
        if matched and extra:
            for combo in matched:
                combo.update(extra)
        elif not matched and not any(_same(wanted, c) for c in product):
            product.append(dict(wanted))
    return product


class _ShapeProblem(Exception):
    def __init__(self, at: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.at = at
        self.message = message


def _shape_error(at: tuple[str | int, ...], message: str) -> _ShapeProblem:
    return _ShapeProblem(at, message)


def load_matrix(path: Path | str, overlays: Sequence[Path | str] = (),
                sets: Sequence[str] = (), *, check: bool = True) -> MatrixPlan | None:
    """The plan's variants, each loaded (and compiled, with `check`); None when the plan
    has no matrix. Raises one PlanError for the first invalid variant."""
    return matrix_of(load_plan(path, overlays, sets), path, overlays, sets, check=check)


def matrix_of(base: LoadedPlan, path: Path | str, overlays: Sequence[Path | str] = (),
              sets: Sequence[str] = (), *, check: bool = True) -> MatrixPlan | None:
    """As `load_matrix`, for a plan already loaded (`base`, from these very layers): a
    command that loaded the plan learns whether it has a matrix without loading it again."""
    matrix = base.plan.matrix
    if matrix is None:
        return None
    axes = matrix.axes()
    try:
        combos = combinations(axes, matrix.include, matrix.exclude)
    except _ShapeProblem as problem:
        raise _located(base, ("matrix", *problem.at), problem.message) from None
    if len(combos) > MAX_VARIANTS:
        raise _located(base, ("matrix",), f"the matrix makes {len(combos):,} variants, more "
                       f"than {MAX_VARIANTS}", hint="narrow it with exclude:, or split it")
    keys = [dotted_key(p) for p in axes]
    for combo in combos:
        keys += [k for k in combo if k not in keys]
    shown = varying(keys, combos)
    variants = []
    for index, values in enumerate(combos, 1):
        name = f"variant {index} of {len(combos)} ({label(values, shown)})"
        try:
            loaded = load_plan(path, overlays, [*sets, *variant_sets(values)])
            if check:
                # only a check compiles (start-up time)
                from orchestrator.apply.compile import check as compile_check

                compile_check(loaded)
        except PlanError as error:
            raise _variant_error(base, name, values, error) from None
        variants.append(Variant(index, values, loaded))
    objective = parse_objective(matrix.objective) if matrix.objective else None
    return MatrixPlan(base, keys, variants, objective)


def _located(base: LoadedPlan, field: tuple[str | int, ...], message: str, *,
             hint: str | None = None) -> PlanError:
    dotted = ".".join(str(p) for p in field)
    origin = None
    probe = dotted
    while probe and origin is None:
        origin = base.field_origins.get(probe)
        probe = probe.rpartition(".")[0]
    return PlanError(message, file=origin.layer if origin else None,
                     line=origin.line if origin else None, field=dotted, hint=hint)


def _variant_error(base: LoadedPlan, name: str, values: Values, error: PlanError) -> PlanError:
    """The variant's error, pointed at the matrix axis that made it when the error is about
    a value the variant sets (else where the loader found it)."""
    field = error.field or ""
    # the value's own field, one below it, or one above it (`smoke.x` makes `smoke` a
    # mapping where a list is expected: the error is about `smoke`)
    axis = next((k for k in values if field == k or field.startswith(f"{k}.")
                 or (field and k.startswith(f"{field}."))
                 or (error.file or "").startswith(f"--set {k}=")), None)
    if axis is None and error.file and not error.file.startswith("--set "):
        where = f"{error.file}:{error.line}" if error.line else error.file
        return PlanError(f"matrix {name}: {error.message} (at {where})", file=error.file,
                         line=error.line, column=error.column, field=error.field,
                         expected=error.expected, snippet=error.snippet, hint=error.hint)
    origin = base.field_origins.get(f"matrix.{axis}") if axis else None
    if origin is None and axis is not None and base.plan.matrix is not None and any(
            axis in {dotted_key(canonical(k)) for k in entry} for entry in base.plan.matrix.include):
        origin = base.field_origins.get("matrix.include")  # set by an include entry
    if origin is None:
        origin = base.field_origins.get("matrix")
    setting = f" (it sets {axis}={_cut(json.dumps(values[axis]))})" if axis else ""
    return PlanError(f"matrix {name} is not a valid plan{setting}: {error.message}",
                     file=origin.layer if origin else None, line=origin.line if origin else None,
                     field=error.field, expected=error.expected, hint=error.hint)


# What a change of a variant's plan costs: a new install, a restart of the server, or
# neither (only the benchmark or the smoke checks differ).
_NOT_SERVICE = ("bench", "smoke", "collect", "description", "matrix", "name", "extends")


def install_key(plan: Plan) -> str:
    """What the install depends on: the sections that make the python step (said on the
    plan model's fields), and the commands that run before it."""
    data = plan.model_dump(mode="json")
    early = [c for c in data.get("commands", []) if c.get("when") == "before_install"]
    return json.dumps([*(data.get(name) for name in sections_of(Plan, "python")), early],
                      sort_keys=True)


def service_key(plan: Plan) -> str:
    data = plan.model_dump(mode="json")
    return json.dumps({k: v for k, v in data.items() if k not in _NOT_SERVICE}, sort_keys=True)


def run_order(variants: Sequence[Variant]) -> list[Variant]:
    """Variants sharing an install together, and within them those sharing a server, each
    group where its first variant was written: the fewest installs and restarts."""
    installs: dict[str, int] = {}
    services: dict[str, int] = {}
    for position, variant in enumerate(variants):
        installs.setdefault(install_key(variant.plan), position)
        services.setdefault(service_key(variant.plan), position)
    return sorted(variants, key=lambda v: (installs[install_key(v.plan)],
                                           services[service_key(v.plan)], v.index))


def transition(before: Plan | None, after: Plan) -> str:
    """What moving from `before` to `after` takes: "install" (another install), "restart"
    (another server), "reuse" (the same server); "first" for the first variant."""
    if before is None:
        return "first"
    if install_key(before) != install_key(after):
        return "install"
    return "restart" if service_key(before) != service_key(after) else "reuse"
