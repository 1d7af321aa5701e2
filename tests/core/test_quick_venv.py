"""The tests' quick `python3` (fixtures/quick_venv.py) makes a venv as `python3 -m venv` would
there: its own paths in its scripts and pyvenv.cfg, a pip that installs into it, and the real
python3 for anything else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fixtures import quick_venv

pytestmark = pytest.mark.slow  # the first call of a session makes the template (5 s)


def test_a_copied_venv_is_its_own(tmp_path: Path) -> None:
    python3 = quick_venv.interpreter()
    for name in ("a", "b b"):  # a copy; and a path with a space, which the real venv makes
        venv = tmp_path / name
        subprocess.run([python3, "-m", "venv", str(venv)], check=True, timeout=120)
        pip = subprocess.run([str(venv / "bin" / "pip"), "--version"], capture_output=True,
                             text=True, check=True).stdout
        assert f"from {venv}/lib/" in pip
        assert "command = " in (venv / "pyvenv.cfg").read_text()
        assert (venv / "pyvenv.cfg").read_text().rstrip().endswith(f"-m venv {venv}")
        scripts = [p for p in (venv / "bin").iterdir() if p.is_file() and not p.is_symlink()]
        assert scripts and all("template-" not in p.read_text() for p in scripts)
        assert f'VIRTUAL_ENV_PROMPT="({name}) "' in (venv / "bin" / "activate").read_text()
    said = subprocess.run([python3, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
    assert said.stdout == "42\n"
