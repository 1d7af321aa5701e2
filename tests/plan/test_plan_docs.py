"""The generated reference and the JSON Schema stay in step with the models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from fixtures import zygote

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
    assert "$defs" not in json.dumps(schema)  # draft 7 says `definitions`
    jsonschema.Draft7Validator.check_schema(schema)
    assert "required" not in schema  # a layer may leave anything to another
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(Plan.model_fields)
    health = schema["definitions"]["Health"]["properties"]["startup_timeout"]
    assert any({"type": "string"} in option.get("anyOf", [option]) for option in health["anyOf"])


def _errors(data: object) -> list[str]:
    """Where each error is, as an editor would underline it (the deepest match)."""
    validator = jsonschema.Draft7Validator(json_schema())

    def deepest(error: jsonschema.ValidationError) -> list[object]:
        paths = [deepest(inner) for inner in error.context or []]
        return max(paths, key=len, default=list(error.absolute_path))

    return [".".join(map(str, deepest(error))) for error in validator.iter_errors(data)]


def test_every_shipped_plan_and_layer_passes_the_schema() -> None:
    files = sorted((ROOT / "plans").rglob("*.yaml"))
    assert len(files) >= 7  # base, three plans, three sim plans
    for path in files:
        assert _errors(yaml.safe_load(path.read_text())) == [], path


def test_the_schema_still_catches_unknown_keys_and_wrong_types() -> None:
    assert _errors({"name": "p", "servcie": {}}) == [""]
    assert _errors({"service": {"port": "eighty"}}) == ["service.port"]
    assert _errors({"service": {"port": "${vars.port}", "args": None}, "env": {"X": None}}) == []
    assert _errors({"bench": {"concurrency": [1, 2], "mode": "sideways"}}) == ["bench.mode"]


@pytest.mark.slow
def test_the_show_origin_example_in_the_docs_is_what_orch_prints() -> None:
    doc = (ROOT / "docs" / "plans.md").read_text()
    marker = "<!-- real output of: orch plan plans/sim/kimi-nvfp4.yaml --show-origin --set service.port=8001 -->"
    block = doc.split(marker, 1)[1].split("```")[1]
    # its rows, line numbers included (tests/core/test_docs_excerpts.py masks figures)
    shown = [line.split() for line in block.splitlines() if line.startswith("  ") and "field" not in line]
    result = zygote.run(["plan", "plans/sim/kimi-nvfp4.yaml", "--show-origin", "--set",
                         "service.port=8001"], cwd=ROOT, timeout=120)
    printed = [line.split() for line in result.stdout.splitlines()]
    assert shown and all(row in printed for row in shown), result.stdout
