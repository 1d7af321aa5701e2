"""Plans for the service tests, loaded from tests/service/plans/ or built from a dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.plan.models import Plan

PLANS = Path(__file__).parent / "plans"


def load_plan(name: str) -> Plan:
    return Plan.model_validate(yaml.safe_load((PLANS / f"{name}.yaml").read_text()))


def make_plan(service: dict[str, Any] | None = None, **sections: Any) -> Plan:
    """A minimal plan with `service` merged over a small vLLM service."""
    base: dict[str, Any] = {"engine": "vllm", "model": "org/model", "port": 8000}
    data: dict[str, Any] = {"name": "t", **sections}
    if service is not None:
        data["service"] = {**base, **service}
    return Plan.model_validate(data)
