"""uv goes into a venv by the first pip there is, through a real shell and real venvs: the
venv's own, else the interpreter's (pip 22.3+ installs into another environment), else one
that ensurepip puts into the venv. The paths are ones a plan may not hold (a space, a quote,
a `$`): the command quotes them all the same. A uv venv the plan moves to pip gets pip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.orchcli import orch

from orchestrator.packages import Installer

pytestmark = pytest.mark.slow
BASE = sys.executable  # this suite's venv: a python with a recent pip


def _venv(path: Path, *, pip: bool, interpreter: str = BASE) -> Path:
    subprocess.run([interpreter, "-m", "venv", *([] if pip else ["--without-pip"]), str(path)],
                   check=True)
    return path


def _has_pip(venv: Path) -> bool:
    return subprocess.run([venv / "bin" / "python", "-c", "import pip"],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("route", ["the venv's pip", "the interpreter's pip", "ensurepip"])
def test_uv_goes_into_the_venv_by_the_first_pip_there_is(tmp_path: Path, route: str) -> None:
    top = tmp_path / "a b'c $HOME"
    top.mkdir()
    # the interpreter a plan names: one with pip, or a pip-less one (a venv made without it)
    interpreter = (BASE if route == "the interpreter's pip"
                   else str(_venv(top / "bare", pip=False) / "bin" / "python"))
    venv = _venv(top / "venv", pip=route == "the venv's pip")
    command = Installer(str(venv), "uv").install_uv("uv", interpreter)
    done = subprocess.run(["sh", "-c", command.raw()], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert subprocess.run([venv / "bin" / "uv", "--version"], capture_output=True,
                          text=True).stdout.startswith("uv ")
    # the interpreter's pip installs into the venv without putting pip there
    assert _has_pip(venv) is (route != "the interpreter's pip")
    assert not (Path.home() / "venv").exists()  # `$HOME` stayed a name


def test_a_failing_install_fails_the_command(tmp_path: Path) -> None:
    venv = _venv(tmp_path / "venv", pip=False)
    command = Installer(str(venv), "uv").install_uv("uv==0.0.0.404", BASE)
    done = subprocess.run(["sh", "-c", command.raw()], capture_output=True, text=True)
    assert done.returncode != 0 and "uv==0.0.0.404" in done.stderr, done.stderr


def test_a_uv_venv_moved_to_pip_gets_pip_and_then_converges(tmp_path: Path) -> None:
    """`orch apply` on this machine: a uv venv is made without pip; the same plan with
    `installer: pip` puts pip in first, and is a no-op after."""
    venv = tmp_path / "venv"

    def apply(installer: str) -> str:
        (tmp_path / "p.yaml").write_text(
            f"name: moved\nhosts: localhost\npython: {{venv: {venv}, installer: {installer}}}\n")
        done = orch("apply", "p.yaml", cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return " ".join(done.stdout.split())

    apply("uv")
    assert (venv / "bin" / "uv").exists() and not _has_pip(venv)
    assert "put pip into the venv (made without it)" in apply("pip")
    assert _has_pip(venv)
    assert "put pip" not in apply("pip")
