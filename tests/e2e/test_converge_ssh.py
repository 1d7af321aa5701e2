"""`orch plan` / `orch apply` end to end over a real sshd: real venvs, real pip installs of
small real wheels, real files; the CLI runs as a subprocess like a user runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import zygote
from fixtures.orchcli import SECRET, last_run, orch, write_inventory
from fixtures.sshd import SshServer
from fixtures.wheels import make_wheel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("wheels")
    for name, version in [
        ("orchtest-alpha", "1.0.0"), ("orchtest-alpha", "2.0.0"),
        ("orchtest-beta", "1.0.0"), ("orchtest-gamma", "0.3.0"),
        ("orchtest-fam-python", "0.6.4"), ("orchtest-fam-cubin", "0.6.4"),
        ("orchtest-fam-cubin", "0.6.3"),
    ]:
        make_wheel(dest, name, version)
    # Declares a dependency no index here has: installing it with resolution fails.
    make_wheel(dest, "orchtest-needy", "1.0.0", requires=["orchtest-absent>=1"])
    return dest


def write_plan(path: Path, venv: Path, wheels: Path, **overrides: Any) -> Path:
    plan: dict[str, Any] = {
        "name": "e2e",
        "hosts": "all",
        "python": {"venv": str(venv), "interpreter": "python3", "installer": "pip"},
        "install": {
            "packages": ["orchtest-alpha==2.0.0", "orchtest-beta==1.0.0", "orchtest-gamma==0.3.0"],
            "find_links": [str(wheels)],
            "no_index": True,
            "families": [["orchtest-fam-python", "orchtest-fam-cubin"]],
        },
        "files": [
            {"path": str(venv.parent / "etc" / "a.conf"), "content": "token=${env:ORCH_E2E_SECRET}\n", "mode": "0600"},
            {"path": str(venv.parent / "etc" / "b.conf"), "content": "workers=${vars.workers}\n"},
        ],
        "vars": {"workers": 4},
    }
    for key, value in overrides.items():
        plan[key] = value
    path.write_text(yaml.safe_dump(plan))
    return path


def venv_pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check", *args],
                   check=True, capture_output=True)


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


@pytest.fixture()
def workdir(tmp_path: Path, sshd: SshServer) -> Iterator[tuple[Path, Path]]:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    yield tmp_path, inventory


@dataclass
class Applied:
    tmp: Path
    inventory: Path
    venv: Path
    plan: Path

    def orch(self, command: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return orch(command, self.plan, "-i", self.inventory, *args, cwd=self.tmp)


@pytest.fixture()
def applied(workdir: tuple[Path, Path], wheels: Path) -> Applied:
    """The plan applied once to a fresh host venv."""
    tmp, inventory = workdir
    state = Applied(tmp, inventory, tmp / "host" / "venv", write_plan(tmp / "plan.yaml", tmp / "host" / "venv", wheels))
    first = state.orch("apply")
    assert first.returncode == 0, first.stdout + first.stderr
    return state


@pytest.mark.parametrize("client", ["paramiko", "openssh", "auto"])
def test_apply_twice_second_is_a_no_op_in_at_most_two_round_trips(
    workdir: tuple[Path, Path], sshd: SshServer, wheels: Path, client: str
) -> None:
    """auto, the default, takes the ssh client here: the second apply reuses the master."""
    tmp, inventory = workdir
    if client != "auto":  # openssh: the second apply reuses the first's master
        inventory = write_inventory(tmp / "inventory.yaml", sshd.inventory(
            1, ssh=sshd.ssh_settings(transport=client, control_persist=10)))
    venv = tmp / "host" / "venv"
    plan = write_plan(tmp / "plan.yaml", venv, wheels)

    first = orch("apply", plan, "-i", inventory, cwd=tmp)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "changed" in first.stdout
    assert (site_packages(venv) / "orchtest_alpha" / "__init__.py").read_text() == '__version__ = "2.0.0"\n'
    conf = venv.parent / "etc" / "a.conf"
    assert conf.read_text() == f"token={SECRET}\n"
    assert oct(conf.stat().st_mode & 0o777) == "0o600"
    assert (venv.parent / "etc" / "b.conf").read_text() == "workers=4\n"

    mark = sshd.log_mark()
    second = orch("apply", plan, "-i", inventory, cwd=tmp)
    assert second.returncode == 0, second.stdout + second.stderr
    trips = sshd.round_trips(sshd.inventory(1), since=mark)
    assert trips["h1"] == 1, trips  # the lock program runs the probe: one session
    connections = sshd.log_text(mark).count("Connection from")
    assert connections == (1 if client == "paramiko" else 0), connections
    run = last_run(tmp)
    steps = json.loads((run / "hosts" / "h1" / "steps.json").read_text())
    assert [(s["step"], s["status"]) for s in steps["steps"]] == [
        ("python", "ok"), ("files", "ok")]
    assert json.loads((run / "meta.json").read_text())["status"] == "complete"
    freeze = (run / "hosts" / "h1" / "freeze.txt").read_text()
    assert "orchtest-alpha==2.0.0" in freeze
    # The secret reached the host's file but no artifact and no output.
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(), path
    assert SECRET not in first.stdout + first.stderr + second.stdout

    check = orch("plan", plan, "-i", inventory, "--detailed-exitcode", cwd=tmp)
    assert check.returncode == 0, check.stdout + check.stderr


def test_drift_is_shown_by_plan_and_converged_by_apply(applied: Applied, wheels: Path) -> None:
    venv_pip(applied.venv, "install", "--no-index", "--find-links", str(wheels), "orchtest-alpha==1.0.0")
    (applied.venv.parent / "etc" / "b.conf").write_text("workers=1\n")
    (applied.venv.parent / "etc" / "a.conf").write_text("token=stale\n")

    check = applied.orch("plan", "--detailed-exitcode")
    assert check.returncode == 2, check.stdout + check.stderr
    assert "orchtest-alpha 1.0.0 -> 2.0.0" in check.stdout
    assert "-workers=1" in check.stdout and "+workers=4" in check.stdout
    # A file that holds secrets is never diffed: the host's copy may hold an old secret.
    assert "a.conf: content differs, not shown (it holds secrets)" in check.stdout
    assert "token=stale" not in check.stdout and SECRET not in check.stdout

    apply = applied.orch("apply")
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert applied.orch("plan", "--detailed-exitcode").returncode == 0


def test_family_mismatch_reported_with_both_versions_and_converged(
    workdir: tuple[Path, Path], wheels: Path
) -> None:
    tmp, inventory = workdir
    venv = tmp / "host" / "venv"
    plan = write_plan(tmp / "plan.yaml", venv, wheels)
    data = yaml.safe_load(plan.read_text())
    data["install"]["packages"].append("orchtest-fam-python==0.6.4")
    plan.write_text(yaml.safe_dump(data))
    assert orch("apply", plan, "-i", inventory, cwd=tmp).returncode == 0
    # A leftover from an earlier install, like flashinfer-cubin 0.6.3 beside flashinfer 0.6.4.
    venv_pip(venv, "install", "--no-index", "--find-links", str(wheels), "orchtest-fam-cubin==0.6.3")

    check = orch("plan", plan, "-i", inventory, "--detailed-exitcode", cwd=tmp)
    assert check.returncode == 2
    assert "orchtest-fam-cubin 0.6.3" in check.stdout and "orchtest-fam-python 0.6.4" in check.stdout
    assert "pin orchtest-fam-cubin==0.6.4 in install.packages" in check.stdout

    apply = orch("apply", plan, "-i", inventory, cwd=tmp)
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert "orchtest-fam-cubin 0.6.3 -> 0.6.4 (family)" in apply.stdout
    # The change is reported; the problem it fixed is not repeated as if it still held.
    assert "out of step" not in apply.stdout
    steps = json.loads((last_run(tmp) / "hosts" / "h1" / "steps.json").read_text())["steps"]
    assert steps[0]["findings"] == []
    assert "Version: 0.6.4" in next(site_packages(venv).glob("orchtest_fam_cubin-*.dist-info/METADATA")).read_text()


def test_a_family_mismatch_no_pin_settles_fails_plan_and_apply(
    workdir: tuple[Path, Path], wheels: Path
) -> None:
    # flashinfer-cubin 0.6.3 beside flashinfer-python 0.6.4 and neither pinned: vLLM would
    # crash at start-up. A CI gate on `orch plan`'s exit code must not pass it.
    tmp, inventory = workdir
    venv = tmp / "host" / "venv"
    plan = write_plan(tmp / "plan.yaml", venv, wheels)
    assert orch("apply", plan, "-i", inventory, cwd=tmp).returncode == 0
    venv_pip(venv, "install", "--no-index", "--find-links", str(wheels),
             "orchtest-fam-python==0.6.4", "orchtest-fam-cubin==0.6.3")
    for command in ("plan", "apply"):
        result = orch(command, plan, "-i", inventory, cwd=tmp)
        assert result.returncode == 1, (command, result.stdout + result.stderr)
        assert "package family out of step: orchtest-fam-cubin 0.6.3, orchtest-fam-python 0.6.4" in result.stdout
        assert "pin orchtest-fam-cubin and orchtest-fam-python to one version" in result.stdout
        assert "Traceback" not in result.stderr


def test_modified_file_reported_then_reinstalled_with_clean(applied: Applied) -> None:
    tmp, inventory, plan = applied.tmp, applied.inventory, applied.plan
    patched = site_packages(applied.venv) / "orchtest_beta" / "core.py"
    original = patched.read_text()
    patched.write_text(original + "# debug patch left behind\n")

    check = orch("plan", plan, "-i", inventory, "--detailed-exitcode", cwd=tmp)
    assert check.returncode == 0  # reported, not changed, without clean
    assert "orchtest_beta/core.py" in check.stdout and "install.clean" in check.stdout

    data = yaml.safe_load(plan.read_text())
    data["install"]["clean"] = True
    plan.write_text(yaml.safe_dump(data))
    apply = orch("apply", plan, "-i", inventory, cwd=tmp)
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert "reinstall orchtest-beta==1.0.0" in apply.stdout
    assert patched.read_text() == original


def test_an_unchanged_install_is_skipped_and_a_hand_edit_still_caught(applied: Applied) -> None:
    """The install record (apply/install_gate.py): an apply whose install part is the one that
    last converged skips it, but the probe's RECORD check still sees site-packages edited by
    hand, and then the install converges as before."""
    first = last_run(applied.tmp)
    record = json.loads((applied.venv / ".orch" / "install.json").read_text())
    assert record["run"] == f"e2e/{first.name}"
    again = applied.orch("apply")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"install unchanged since e2e/{first.name}: skipped" in again.stdout

    data = yaml.safe_load(applied.plan.read_text())
    data["install"]["clean"] = True  # the install changed: converged, and recorded anew
    applied.plan.write_text(yaml.safe_dump(data))
    changed = applied.orch("apply")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert f"install changed since e2e/{first.name}: converging" in changed.stdout
    converged = last_run(applied.tmp).name
    assert f"install unchanged since e2e/{converged}: skipped" in applied.orch("apply").stdout

    patched = site_packages(applied.venv) / "orchtest_beta" / "core.py"
    original = patched.read_text()
    patched.write_text(original + "# debug patch left behind\n")
    caught = applied.orch("apply")
    assert caught.returncode == 0, caught.stdout + caught.stderr
    assert f"install unchanged since e2e/{converged}, but the host differs (python: " in caught.stdout
    assert "reinstall orchtest-beta==1.0.0" in caught.stdout
    assert patched.read_text() == original


def test_locked_redeploy_reinstalls_the_frozen_set(applied: Applied, wheels: Path) -> None:
    tmp, inventory, venv = applied.tmp, applied.inventory, applied.venv
    frozen = last_run(tmp)
    # Later the host drifts: another version and an extra package.
    venv_pip(venv, "install", "--no-index", "--find-links", str(wheels), "orchtest-alpha==1.0.0", "orchtest-fam-cubin==0.6.3")

    locked = orch("apply", "--locked", frozen, "-i", inventory, cwd=tmp)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    assert "uninstall 1 unpinned: orchtest-fam-cubin" in locked.stdout
    run = last_run(tmp)
    assert (run / "hosts" / "h1" / "freeze.txt").read_text() == (frozen / "hosts" / "h1" / "freeze.txt").read_text()


def test_a_locked_apply_installs_exactly_the_frozen_set_without_resolving(
    workdir: tuple[Path, Path], wheels: Path
) -> None:
    tmp, inventory = workdir
    venv = tmp / "host" / "venv"
    plan = write_plan(tmp / "plan.yaml", venv, wheels)
    data = yaml.safe_load(plan.read_text())
    data["install"]["packages"] = ["orchtest-alpha==2.0.0", "orchtest-needy==1.0.0"]
    plan.write_text(yaml.safe_dump(data))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # orchtest-needy's dependency exists nowhere: it was installed without it, like a venv
    # whose packages were installed with --no-deps (vLLM's wheel on a host without CUDA deps).
    venv_pip(venv, "install", "--no-index", "--no-deps", "--find-links", str(wheels), "orchtest-needy==1.0.0")
    assert orch("apply", plan, "-i", inventory, cwd=tmp).returncode == 0
    frozen = last_run(tmp)
    venv_pip(venv, "uninstall", "--yes", "orchtest-needy")  # drift

    check = orch("plan", "--locked", frozen, "-i", inventory, "--detailed-exitcode", cwd=tmp)
    assert check.returncode == 2, check.stdout + check.stderr
    assert "orchtest-needy missing -> 1.0.0" in check.stdout
    assert len(list((tmp / "runs").glob("*/*"))) == 1  # check mode writes no run folder

    locked = orch("apply", "--locked", frozen, "-i", inventory, cwd=tmp)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    assert (last_run(tmp) / "hosts" / "h1" / "freeze.txt").read_text() == \
        (frozen / "hosts" / "h1" / "freeze.txt").read_text()

    other = orch("plan", "--locked", frozen, "-i", inventory, "--limit", "h2", cwd=tmp)
    assert other.returncode == 1
    assert "--limit names h2, which" in other.stderr and "froze no package set" in other.stderr
    assert "Traceback" not in other.stderr


def test_missing_secret_fails_before_connecting(workdir: tuple[Path, Path], wheels: Path) -> None:
    tmp, inventory = workdir
    plan = write_plan(tmp / "plan.yaml", tmp / "host" / "venv", wheels)
    env = {k: v for k, v in os.environ.items() if k != "ORCH_E2E_SECRET"}
    result = zygote.run(["apply", str(plan), "-i", str(inventory)], cwd=tmp, env=env, timeout=60)
    assert result.returncode == 1
    assert "ORCH_E2E_SECRET" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp / "runs").exists()


def test_three_hosts_in_parallel_and_one_unreachable_does_not_stop_the_others(
    tmp_path: Path, netns_hosts: Any
) -> None:
    inventory = netns_hosts.inventory(connect_retries=0)
    inventory.hosts["dead"] = inventory.hosts["n1"].model_copy(update={"port": 1})
    inventory.groups["all"].append("dead")
    inv = write_inventory(tmp_path / "inventory.yaml", inventory)
    target = tmp_path / "shared.conf"  # the namespaces share this machine's filesystem
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "e2e", "hosts": "all",
        "files": [{"path": str(target), "content": "same everywhere\n"}],
    }))
    marks = netns_hosts.log_marks()
    result = orch("apply", plan, "-i", inv, "--json", cwd=tmp_path)
    assert result.returncode == 1  # the dead host fails the run ...
    events = [json.loads(line) for line in result.stdout.splitlines()]
    ends = {e["host"]: e for e in events if e["event"] == "host_end"}
    assert set(ends) == {"n1", "n2", "n3", "dead"}
    assert ends["dead"]["failed"] and "dead" in ends["dead"]["error"]
    for name in ("n1", "n2", "n3"):  # ... but every other host converged
        assert not ends[name]["failed"], ends[name]
    assert target.read_text() == "same everywhere\n"
    assert all(n >= 1 for n in netns_hosts.round_trips(marks).values())
    meta = json.loads((last_run(tmp_path) / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["hosts"] == ["n1", "n2", "n3", "dead"]


def test_a_connection_dropped_mid_apply_is_recovered_by_retry(
    workdir: tuple[Path, Path], sshd: SshServer, wheels: Path
) -> None:
    tmp, _ = workdir  # paramiko: one connection to drop, found in sshd's log
    inventory = write_inventory(tmp / "inventory.yaml", sshd.inventory(
        1, ssh=sshd.ssh_settings(transport="paramiko")))
    plan = write_plan(tmp / "plan.yaml", tmp / "host" / "venv", wheels)
    mark = sshd.log_mark()
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "apply", str(plan), "-i", str(inventory)],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "ORCH_E2E_SECRET": SECRET},
    )
    port = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the probe is session 1; creating the venv is session 2
        log = sshd.log_text(mark)
        found = re.search(r"Connection from \S+ port (\d+)", log)
        if found and log.count("Starting session: command") >= 2:
            port = int(found.group(1))
            break
        time.sleep(0.05)
    assert port is not None, sshd.log_tail()
    time.sleep(0.3)  # mid-command: `python3 -m venv` takes seconds
    assert sshd.drop(port)
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, out + err
    events = (last_run(tmp) / "events.jsonl").read_text()
    assert '"event": "retry"' in events
    assert (tmp / "host" / "venv" / "bin" / "python").exists()


def test_the_uv_installer_installs_pins_and_reinstalls_patched_files(
    workdir: tuple[Path, Path], wheels: Path
) -> None:
    tmp, inventory = workdir
    venv = tmp / "host" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # The host's uv: this machine's own (no index is reachable from a test).
    shutil.copy(Path(sys.executable).parent / "uv", venv / "bin" / "uv")
    plan = write_plan(tmp / "plan.yaml", venv, wheels)
    data = yaml.safe_load(plan.read_text())
    data["python"]["installer"] = "uv"
    data["install"]["clean"] = True
    plan.write_text(yaml.safe_dump(data))

    first = orch("apply", plan, "-i", inventory, cwd=tmp)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "install uv" not in first.stdout
    patched = site_packages(venv) / "orchtest_alpha" / "core.py"
    original = patched.read_text()
    patched.write_text("raise SystemExit('stale debug patch')\n")

    again = orch("apply", plan, "-i", inventory, cwd=tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "reinstall orchtest-alpha==2.0.0" in again.stdout
    assert patched.read_text() == original
    assert "orchtest-alpha==2.0.0" in (last_run(tmp) / "hosts" / "h1" / "freeze.txt").read_text()
