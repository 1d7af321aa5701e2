"""The generated reference and the JSON Schema stay in step with the models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from orchestrator.plan.docs import REGENERATE, json_schema, render_reference, sections
from orchestrator.plan.models import Plan

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_current() -> None:
    committed = (ROOT / "docs" / "plan-reference.md").read_text()
    assert committed == render_reference(), f"docs/plan-reference.md is stale; run: {REGENERATE}"


def test_the_reference_documents_every_field() -> None:
    text = render_reference()
    for path, model in sections():
        assert f"({model.__name__})" in text
        for name, info in model.model_fields.items():
            assert f"| `{name}` |" in text, f"{path}.{name} missing"
            assert info.description, f"{model.__name__}.{name} has no description"
    assert "| `startup_timeout` | duration (> 0) | `30m` |" in text
    assert "| `installer` | `uv` \\| `pip` | `pip` |" in text
    assert "| `model` | string | **required** |" in text


def test_the_module_prints_the_reference() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.plan.docs"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.stdout == render_reference()


def test_json_schema_describes_the_plan() -> None:
    schema = json_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(Plan.model_fields)
    health = schema["$defs"]["Health"]["properties"]["startup_timeout"]
    assert {"type": "string"} in health["anyOf"]  # "30m" is valid in an editor
    json.dumps(schema)  # serialisable
