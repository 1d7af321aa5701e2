"""`orch validate` and `orch schema` as real subprocesses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fixtures import zygote

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "plan" / "bad"


def orch(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run([*args], cwd=ROOT, timeout=60)


def test_validate_reports_each_plan_and_fails_on_a_bad_one() -> None:
    result = orch(
        "validate",
        "plans/kimi-nvfp4.yaml",
        str(BAD / "unknown-service-key.yaml"),
        "plans/sim/kimi-nvfp4.yaml",
        str(BAD / "yaml-colon-in-value.yaml"),
    )
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines == [
        "ok   plans/kimi-nvfp4.yaml (kimi-nvfp4; 2 layers; secrets: HF_TOKEN)",
        "ok   plans/sim/kimi-nvfp4.yaml (sim-kimi-nvfp4; 3 layers)",
    ]
    assert "Traceback" not in result.stderr
    assert "unknown key 'modle' in service" in result.stderr
    assert "hint: did you mean 'model'?" in result.stderr
    assert "YAML syntax error" in result.stderr
    assert result.stderr.count("FAIL ") == 2


@pytest.mark.slow
def test_validate_applies_overlays_and_sets() -> None:
    result = orch("validate", "plans/kimi-nvfp4.yaml", "--set", "service.port=http")
    assert result.returncode == 1
    assert "--set service.port=http: service.port: expected an integer" in result.stderr
    assert "Traceback" not in result.stderr
    ok = orch("validate", "plans/kimi-nvfp4.yaml", "-f", "plans/sim/kimi-nvfp4.yaml")
    assert ok.returncode == 0, ok.stderr


def test_validate_with_debug_shows_the_traceback() -> None:
    result = orch("--debug", "validate", str(BAD / "empty.yaml"))
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "PlanError" in result.stderr


def test_schema_prints_json() -> None:
    result = orch("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "orch plan"
    assert "service" in schema["properties"]


def test_validate_finds_what_only_the_launch_command_would_reject(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: p\npython: {venv: /opt/v}\nservice:\n  model: m\n  args:\n    port: 9000\n"
    )
    result = orch("validate", str(plan))
    assert result.returncode == 1
    assert f"{plan}:6: flag 'port' has its own field" in result.stderr
    assert "expected: set service.port instead" in result.stderr
    assert "Traceback" not in result.stderr
    via_set = orch("validate", "plans/sim/kimi-nvfp4.yaml", "--set", "service.args.port=1")
    assert "--set service.args.port=1: flag 'port' has its own field" in via_set.stderr
