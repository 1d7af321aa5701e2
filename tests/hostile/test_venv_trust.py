"""A venv another user could change is refused before its python runs (issue 38, item 11):
root's apply runs `<venv>/bin/python` (pip, the probe's queries, the service), so a venv
another user made, or one in a folder others may write (a shared `/tmp/orch-sim`), would be
that user's code run as root. Through the real CLI on this machine, with `nobody` (uid
65534) as the other user; the planted `bin/python` writes a marker when it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures.orchcli import orch

from orchestrator.facts.venv_trust import VENV_TRUST, venv_distrust

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
NOBODY = 65534


def _planted(tmp_path: Path, folder: Path) -> tuple[Path, Path]:
    """A venv at `folder/venv` whose python only leaves a marker; the plan that installs into it."""
    venv, marker = folder / "venv", tmp_path / "ran-as-root"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.0\n")
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\nexit 3\n")
    python.chmod(0o755)
    plan = tmp_path / "p.yaml"
    plan.write_text(f"name: trust\nhosts: localhost\npython:\n  venv: {venv}\n"
                    "  interpreter: python3\ninstall:\n  packages: [six==1.16.0]\n")
    return plan, marker


def _chown(top: Path, uid: int) -> None:
    for here, folders, files in os.walk(top):
        for name in [*folders, *files]:
            os.lchown(os.path.join(here, name), uid, uid)
    os.lchown(top, uid, uid)


def _refused(result: object, *named: str) -> str:
    out = " ".join((result.stdout + result.stderr).split())  # type: ignore[attr-defined]
    assert result.returncode == 1, out  # type: ignore[attr-defined]
    assert "refusing the venv" in out and "Traceback" not in out, out
    for word in named:
        assert word in out, (word, out)
    return out


@pytest.mark.slow
def test_a_venv_another_user_owns_is_refused_before_its_python_runs(tmp_path: Path) -> None:
    plan, marker = _planted(tmp_path, tmp_path / "shared")
    _chown(tmp_path / "shared" / "venv", NOBODY)
    venv = tmp_path / "shared" / "venv"
    _refused(orch("plan", plan, cwd=tmp_path, timeout=120),
             f"{venv} (owner nobody, mode 0755) is owned by another user", f"remove {venv}")
    _refused(orch("apply", plan, cwd=tmp_path, timeout=120), "owner nobody")
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.parametrize("mode", [0o1777, 0o777])
def test_a_venv_in_a_world_writable_folder_of_another_user_is_refused(
        tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "orch-sim"  # as another user may make /tmp/orch-sim before root's apply
    plan, marker = _planted(tmp_path, shared)
    shared.chmod(mode)
    os.chown(shared, NOBODY, NOBODY)
    out = _refused(orch("apply", plan, cwd=tmp_path, timeout=120),
                   f"{shared} (owner nobody, mode {mode:04o}) is owned by another user")
    assert "could change what orch runs there as root" in out and "~/.cache/orch" in out
    assert not marker.exists()


@pytest.mark.slow
def test_a_world_writable_folder_of_root_is_refused_unless_sticky(tmp_path: Path) -> None:
    shared = tmp_path / "open"
    plan, marker = _planted(tmp_path, shared)
    shared.chmod(0o777)  # root's own, but anyone may swap the venv inside it
    _refused(orch("apply", plan, cwd=tmp_path, timeout=120),
             f"{shared} (owner root, mode 0777) is writable by others", f"chmod go-w {shared}")
    assert not marker.exists()


@pytest.mark.slow
def test_a_venv_of_the_users_own_runs_its_python(tmp_path: Path) -> None:
    """The control: the same venv, root's own in a sticky folder of root's, is trusted (and
    its planted python, which fails pip, does run)."""
    shared = tmp_path / "sticky"
    plan, marker = _planted(tmp_path, shared)
    shared.chmod(0o1777)
    result = orch("apply", plan, cwd=tmp_path, timeout=120)
    assert "refusing the venv" not in result.stdout + result.stderr
    assert marker.exists()


def _problems(venv: Path) -> list[tuple[str, str]]:
    VENV_TRUST.clear()  # the host side keeps its answers for one run of the program
    return [(p["path"], p["why"]) for p in venv_distrust(str(venv))]


def test_the_rule_on_the_host_side(tmp_path: Path) -> None:
    """The folder a venv will be created in is the nearest one that exists; a sticky folder
    of another user's is theirs to empty; a link is judged where it leads."""
    sticky_root = tmp_path / "sticky"
    sticky_root.mkdir(mode=0o1777)
    sticky_root.chmod(0o1777)
    assert _problems(sticky_root / "not" / "yet" / "venv") == []  # root's own: root may
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    theirs.chmod(0o1777)
    os.chown(theirs, NOBODY, NOBODY)
    assert _problems(theirs / "not" / "yet" / "venv") == [(str(theirs), "owned by another user")]
    open_dir = tmp_path / "open"
    (open_dir / "deep").mkdir(parents=True)
    open_dir.chmod(0o777)  # above the venv's folder: anyone could rename `deep` away
    assert _problems(open_dir / "deep" / "venv") == [(str(open_dir), "writable by others")]
    (tmp_path / "link").symlink_to(theirs)
    assert (str(theirs), "owned by another user") in _problems(tmp_path / "link" / "venv")
    mine = tmp_path / "mine" / "venv"
    (mine / "bin").mkdir(parents=True)
    (mine / "bin").chmod(0o777)
    assert _problems(mine) == [(str(mine / "bin"), "writable by others")]


def test_a_folder_another_user_makes_after_the_probe_is_refused_when_the_venv_is_made(
        tmp_path: Path) -> None:
    """The probe saw no folder (a race for /tmp/orch-sim): the creating command itself
    checks that the venv's folder is the user's own before `python -m venv` runs in it."""
    from orchestrator.errors import OrchError
    from orchestrator.facts import Facts, probe
    from orchestrator.plan.models import Install, PythonEnv
    from orchestrator.steps.base import apply_changes
    from orchestrator.steps.python_env import PythonEnvStep
    from orchestrator.transport.local import LocalTransport

    shared, marker = tmp_path / "orch-sim", tmp_path / "ran-as-root"
    interpreter = tmp_path / "python3"  # what would make the venv: leaves the marker
    interpreter.write_text(f"#!/bin/sh\ntouch {marker}\n")
    interpreter.chmod(0o755)
    step = PythonEnvStep(PythonEnv(venv=str(shared / "venv"), interpreter=str(interpreter)),
                         Install())
    transport = LocalTransport("local")
    facts: Facts = probe(transport, step.request())
    plan = step.plan(facts)
    assert plan.blocked is None and plan.changes[0].summary.startswith("create venv")
    shared.mkdir()  # another user wins the race after the probe
    shared.chmod(0o1777)
    os.chown(shared, NOBODY, NOBODY)
    with pytest.raises(OrchError, match=rf"refusing to create the venv: .*nobody .*{shared}"):
        apply_changes(transport, plan.changes[:1])
    assert not marker.exists() and not (shared / "venv").exists()
    shared.rmdir()  # and with nobody in the way, the same change runs the interpreter
    apply_changes(transport, plan.changes[:1])
    assert marker.exists()


@pytest.mark.slow
def test_orch_stop_does_not_write_through_a_venv_another_user_owns(tmp_path: Path) -> None:
    """`orch stop` touches a marker in the venv's state folder as root: in another user's
    venv a link there would have root create the file it names."""
    plan, _ = _planted(tmp_path, tmp_path / "shared")
    plan.write_text(plan.read_text() + "service:\n  engine: sim\n  model: m\n"
                    f"  name: trust-{tmp_path.name[-10:].strip('_')}\n  backend: process\n")
    state = tmp_path / "shared" / "venv" / ".orch" / "service" / f"trust-{tmp_path.name[-10:].strip('_')}"
    state.mkdir(parents=True)
    victim = tmp_path / "nologin"  # as /etc/nologin would be: its mere existence matters
    (state / "stopped").symlink_to(victim)
    _chown(tmp_path / "shared" / "venv", NOBODY)
    _refused(orch("stop", plan, cwd=tmp_path, timeout=120), "owner nobody",
             "could change what orch writes and signals there as root")
    assert not victim.exists()
