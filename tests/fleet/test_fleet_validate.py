"""`orch validate` of a fleet plan: the router's flags are checked against its own --help,
each problem at its file and line; the shipped fleet plan validates."""

from __future__ import annotations

from pathlib import Path

from fixtures.orchcli import orch

ROOT = Path(__file__).resolve().parents[2]


def test_validate_rejects_a_router_flag_its_help_does_not_have(tmp_path: Path) -> None:
    plan = tmp_path / "fleet.yaml"
    plan.write_text(f"""name: f
extends: {ROOT}/plans/sim/fleet-kimi-int4.yaml
router:
  args:
    retry-max-retries: 3
    health-check-intervall-secs: 5
""")
    done = orch("validate", plan, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "fleet.yaml:6:5: router.args.health-check-intervall-secs: vllm-router 0.1.17 has no " \
           "flag --health-check-intervall-secs; did you mean health-check-interval-secs?" in out
    assert "Traceback" not in out


def test_the_shipped_fleet_plan_validates(tmp_path: Path) -> None:
    done = orch("validate", ROOT / "plans/sim/fleet-kimi-int4.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
