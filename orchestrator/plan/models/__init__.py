"""The plan: pydantic models, the single source of truth for the plan format, one module per
part (base, install, service, smoke, bench, plan: the whole).

The JSON Schema (`orch schema`) and `docs/plan-reference.md` are generated from these models
and their field descriptions. Every model forbids unknown keys.

Strings may hold two kinds of reference, resolved by the loader and `secrets.py`:
`${vars.NAME}` (replaced at load time from `vars:`) and `${env:NAME}` (a secret read from the
controller's environment at run time; the plan object keeps the reference, never the value).
"""

from __future__ import annotations

from orchestrator.plan.models.base import FieldError, canonical_name, parse_duration, parse_pin
from orchestrator.plan.models.bench import AutoSweep, Bench, LatencyMetric, Slo
from orchestrator.plan.models.install import FileSpec, Install, PythonEnv
from orchestrator.plan.models.model import ModelSpec
from orchestrator.plan.models.plan import CommandSpec, Plan
from orchestrator.plan.models.service import ArgValue, Health, ServiceSpec
from orchestrator.plan.models.smoke import PythonFunctionExpect, SmokeCheck, SmokeExpect

__all__ = [
    "ArgValue",
    "AutoSweep",
    "Bench",
    "CommandSpec",
    "FieldError",
    "FileSpec",
    "Health",
    "Install",
    "LatencyMetric",
    "ModelSpec",
    "Plan",
    "PythonEnv",
    "PythonFunctionExpect",
    "ServiceSpec",
    "Slo",
    "SmokeCheck",
    "SmokeExpect",
    "canonical_name",
    "parse_duration",
    "parse_pin",
]
