"""The router's flag table orch ships is its real `--help`: regenerated from the real
`vllm-router` binary and compared, as the vLLM tables are from the real package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fixtures.router import ROUTER_VERSION, router_bin

from orchestrator.engines.router.flags import parse_help, shipped_flags, table_name
from orchestrator.plan.models.fleet import POLICIES
from orchestrator.plan.models.fleet import ROUTER_VERSION as PLAN_VERSION

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "router_flags.py"


def test_the_shipped_table_is_the_real_routers_help(tmp_path: Path) -> None:
    venv = router_bin(ROUTER_VERSION).parent.parent
    done = subprocess.run([sys.executable, str(SCRIPT), str(venv), ROUTER_VERSION,
                           "--tables", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    fresh = (tmp_path / table_name(ROUTER_VERSION)).read_text()
    shipped = shipped_flags(ROUTER_VERSION)
    assert shipped is not None and parse_help(fresh) == shipped
    check = subprocess.run([sys.executable, str(SCRIPT), str(venv), ROUTER_VERSION, "--check"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert PLAN_VERSION == ROUTER_VERSION
    assert shipped["policy"].choices == POLICIES  # the plan's choices are the router's
