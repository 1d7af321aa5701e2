"""What a tune starts from (reads the plan and the inventory): the plan with its `tune:`
space, the SLO and objective (the command line's, else the section's), the hosts trials run
on, and the baseline's values of the tuned axes (the plan's own, as written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import PlanError, UsageError
from orchestrator.inventory import load_inventory
from orchestrator.inventory.limit import narrow
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.plan.models.matrix import canonical
from orchestrator.plan.models.objective import Condition
from orchestrator.plan.models.slo import (
    DEFAULT_OBJECTIVE,
    EXAMPLE,
    SloError,
    describe,
    parse_objective_metric,
    parse_slo,
)
from orchestrator.plan.models.tune import Choice
from orchestrator.plan.variables import substitute_vars
from orchestrator.tune.check import check_space
from orchestrator.tune.forecast import Predict
from orchestrator.tune.space import Space, Values


@dataclass(frozen=True)
class TuneOptions:
    plan: Path
    inventory: Path | None = None
    limit: list[str] = field(default_factory=list)
    overlays: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    slo: str | None = None
    objective: str | None = None
    trials: int | None = None
    seconds: float | None = None  # --budget
    resume: Path | None = None
    runs_dir: Path = Path("runs")
    seed: int | None = 0
    predict: Predict | None = None


@dataclass(frozen=True)
class Setup:
    loaded: LoadedPlan
    space: Space
    slo: tuple[Condition, ...]
    slo_text: str
    objective: str
    hosts: list[str]
    workers: list[str | None]  # one trial at a time on each: a host, or None for all at once
    baseline: Values

    @property
    def name(self) -> str:
        return self.loaded.plan.name


def prepare(options: TuneOptions) -> Setup:
    loaded = load_plan(options.plan, options.overlays, options.sets)
    tune = loaded.plan.tune
    if tune is None:
        raise UsageError(f"{options.plan}: the plan has no tune: section, so nothing to search",
                         hint="add one, e.g. tune: {service.args.max-num-seqs: {low: 32, "
                              "high: 512, log: true}} (docs/tune.md)")
    text = options.slo or tune.slo
    if text is None:
        raise UsageError("no SLO: give --slo (e.g. --slo '" + EXAMPLE + "') or tune.slo in the plan")
    try:
        slo = parse_slo(text)
    except SloError as error:
        raise UsageError(f"--slo: {error}", hint=f"for example --slo '{EXAMPLE}'") from None
    try:
        objective = parse_objective_metric(options.objective or tune.objective or DEFAULT_OBJECTIVE)
    except SloError as error:
        raise UsageError(f"--objective: {error}") from None
    inventory = load_inventory(options.inventory)
    hosts = narrow(inventory, inventory.select(loaded.plan.hosts), options.limit or [])
    # a multi-node server is one deployment on all its hosts: its trials run in turn
    whole = loaded.plan.service is not None and loaded.plan.service.nodes is not None
    workers: list[str | None] = [None] if whole or not hosts else list(hosts)
    check_space(options.plan, options.overlays, options.sets, loaded)
    space = Space(tune.params())
    return Setup(loaded, space, slo, describe(slo), objective, hosts, workers,
                 {key: as_choice(written(loaded.data, key), space.params[key], loaded.data)
                  for key in space.params})


def written(data: dict[str, Any], key: str) -> Any:
    """The plan's value at an axis (None when it sets none)."""
    node: Any = data
    for segment in canonical(key):
        if not isinstance(node, dict) or segment not in node:
            return None
        node = node[segment]
    return node


def as_choice(value: Any, param: Any, data: dict[str, Any]) -> Any:
    """The plan's value as the axis lists it: a choice written as a variable reference
    (`${vars.builds.int4}`) is the baseline when it resolves to the plan's value."""
    if not isinstance(param, Choice) or value in param.values:
        return value
    variables = data.get("vars") or {}
    for choice in param.values:
        try:
            if isinstance(choice, str) and substitute_vars(choice, variables) == value:
                return choice
        except PlanError:
            continue
    return value


def space_json(space: Space) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, param in space.params.items():
        if isinstance(param, Choice):
            out[key] = list(param.values)
        else:
            out[key] = {"low": param.low, "high": param.high, "step": param.step, "log": param.log}
    return out
