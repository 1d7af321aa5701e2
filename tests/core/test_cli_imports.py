"""What an `orch` process imports decides what it costs to start (hundreds of them run in a
test suite, one per command an SRE types): the libraries a command does not use stay out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("httpx", "paramiko", "tenacity")  # ~0.1 s, ~0.2 s and 10 ms of start-up


def _imported(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "orchestrator.cli", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:")}


def test_plan_on_this_machine_imports_no_http_or_ssh_client() -> None:
    imported = _imported("plan", "plans/sim/kimi-nvfp4.yaml")
    assert "orchestrator.apply.run" in imported  # the measurement sees orch's own imports
    assert [name for name in HEAVY if name in imported] == []


VLLM_RESULTS = ROOT / "tests" / "report" / "vllm_results"
HOST_STACK = ("orchestrator.transport", "orchestrator.facts", "orchestrator.inventory",
              "orchestrator.apply")  # SSH, the probe, inventories, the apply's stages


def _host_stack(imported: set[str]) -> list[str]:
    return sorted(name for name in imported
                  if any(name == top or name.startswith(f"{top}.") for top in HOST_STACK))


def test_compare_reads_run_folders_without_the_host_stack() -> None:
    """`orch compare` reads results and run folders (runs/): it never connects to a host."""
    imported = _imported("compare", str(VLLM_RESULTS / "vllm-c1.json"),
                         str(VLLM_RESULTS / "vllm-c4.json"))
    assert _host_stack(imported) == []
    assert "orchestrator.runs.environment_record" in imported  # each run's environment read


def test_report_reads_run_folders_without_the_host_stack(tmp_path: Path) -> None:
    imported = _imported("report", str(VLLM_RESULTS / "vllm-c1.json"),
                         str(VLLM_RESULTS / "vllm-c4.json"), "-o", str(tmp_path / "page.html"))
    assert _host_stack(imported) == []
    assert {"orchestrator.report.html_report", "orchestrator.runs.environment_record"} <= imported


def test_apply_of_a_plan_without_a_service_imports_no_fleet_cluster_or_engine(
        tmp_path: Path) -> None:
    """A no-op re-apply of packages and files is mostly the interpreter's time: the code of
    a fleet, a multi-node server and the engines stays out of it."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: files-only\nhosts: localhost\nfiles:\n"
                    f"  - path: {tmp_path / 'out' / 'a.conf'}\n    content: \"a = 1\\n\"\n")
    runs = str(tmp_path / "runs")
    _imported("apply", str(plan), "--runs-dir", runs)  # converges
    imported = _imported("apply", str(plan), "--runs-dir", runs)  # the no-op
    assert "orchestrator.apply.run" in imported
    assert sorted(name for name in imported if name.startswith(
        ("orchestrator.fleet", "orchestrator.cluster", "orchestrator.engines",
         "orchestrator.apply.fleet"))) == []
