"""Signals end a run as an interrupt; an ssh config an inventory names runs no command on the
controller; durations on the command line read like those of a plan. Real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from fixtures.orchcli import orch


def test_sighup_ends_an_apply_as_an_interrupt(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "hup", "hosts": "localhost", "commands": [
        {"name": "wait", "run": ["sleep", "30"], "when": "before_launch"}]}))
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "apply", str(plan)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 30
    while not list((tmp_path / "runs").glob("hup/*/meta.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # into the command
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 129, out + err
    assert "Traceback" not in out + err and "interrupted (SIGHUP)" in err
    meta = json.loads(next((tmp_path / "runs").glob("hup/*/meta.json")).read_text())
    assert meta["status"] == "interrupted"


def test_an_inventory_named_ssh_config_runs_no_command(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    (tmp_path / "evil_config").write_text(f"Host *\n  ProxyCommand touch {marker}\n")
    (tmp_path / "i.yaml").write_text(
        "hosts: {a: {address: 127.0.0.1, port: 1}}\n"
        "ssh: {config: evil_config, known_hosts: false, connect_retries: 0}\n")
    (tmp_path / "p.yaml").write_text(
        "name: ok\nhosts: a\nfiles: [{path: /tmp/orch-corpus-x, content: x}]\n")
    result = orch("plan", "p.yaml", "-i", "i.yaml", cwd=tmp_path, timeout=60)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1 and "Traceback" not in said, said
    assert "evil_config:2: ProxyCommand in an ssh config named by the inventory" in said
    assert not marker.exists()


def test_a_bare_number_is_a_duration_in_seconds_on_the_command_line(tmp_path: Path) -> None:
    """`orch bench --timeout 5` was refused as "expected a duration" though its help shows
    `default 600.0`."""
    result = orch("bench", "--url", "http://127.0.0.1:1", "--timeout", "5", cwd=tmp_path)
    said = result.stdout + result.stderr
    assert "expected a duration" not in said and "cannot reach" in said, said
