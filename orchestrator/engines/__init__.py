"""The engines orch knows, by the name a plan's `service.engine` gives (engines/base.py says
what an engine is; docs/concepts.md how to add one).

The names a plan can launch are the plan model's (`plan/models/base.py: LAUNCHABLE`): it
validates `service.engine` against them below every engine. An engine's package is imported
on first use, not here: each reads plans and host facts (its preflight rules), and a command
that never asks for an engine does not pay for its import.
"""

from __future__ import annotations

import importlib
from functools import cache

from orchestrator.engines.base import Engine, MetricNames
from orchestrator.plan.models.base import LAUNCHABLE

# Servers orch benchmarks (`orch bench URL`) but does not launch: a package with their
# /metrics names (METRICS) only.
MEASURED: tuple[str, ...] = ("llama",)
# Servers orch launches for the plan's own sections, never as `service.engine`: the fleet's
# router (`router:`).
FRONTS: tuple[str, ...] = ("router",)


def engine(name: str) -> Engine:
    """The engine of that name (the plan's model admits only launchable names)."""
    return _engines()[name]


def known(name: str) -> Engine | None:
    """The engine of that name, or None (a run folder's record may name anything)."""
    return _engines().get(name)


def all_engines() -> tuple[Engine, ...]:
    return tuple(_engines().values())


def metric_names() -> tuple[MetricNames, ...]:
    """Every known server's /metrics names, launchable engines first: a server found by URL
    is read by whichever names it exports."""
    seen: dict[str, MetricNames] = {}
    for names in (*(found.metrics for found in all_engines()), *_measured()):
        seen.setdefault(names.prefix, names)
    return tuple(seen.values())


@cache
def _engines() -> dict[str, Engine]:
    found: dict[str, Engine] = {}
    for name in (*LAUNCHABLE, *FRONTS):
        value = importlib.import_module(f"{__name__}.{name}").ENGINE
        assert isinstance(value, Engine) and value.name == name, f"engines/{name}: ENGINE"
        found[name] = value
    return found


@cache
def _measured() -> tuple[MetricNames, ...]:
    found = [importlib.import_module(f"{__name__}.{package}").METRICS for package in MEASURED]
    assert all(isinstance(names, MetricNames) for names in found)
    return tuple(found)
