"""A file mode with setuid, setgid or sticky bits reaches a host only when the plan says
`special_bits: true` (issue 23, class 7): applied through the CLI to this machine (the local
transport writes the file, the probe reads its mode back).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from fixtures.orchcli import orch


def _plan(tmp_path: Path, *, special_bits: bool) -> Path:
    plan = tmp_path / "p.yaml"
    plan.write_text(
        "name: suid\nhosts: localhost\nfiles:\n"
        f"  - path: {tmp_path}/helper\n"
        "    content: \"#!/bin/sh\\necho hi\\n\"\n"
        "    mode: '4755'\n"
        + ("    special_bits: true\n" if special_bits else ""))
    return plan


def test_a_setuid_mode_is_refused_at_its_line_and_nothing_is_written(tmp_path: Path) -> None:
    result = orch("apply", _plan(tmp_path, special_bits=False), cwd=tmp_path, timeout=120)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, output
    assert "p.yaml:6:11: files.0.mode: mode 4755 sets the setuid" in output
    assert "special_bits: true" in output and "Traceback" not in output
    assert not (tmp_path / "helper").exists()
    assert not (tmp_path / "runs").exists()  # refused before a run folder exists


@pytest.mark.slow
def test_a_setuid_mode_the_plan_asks_for_is_written_and_converges(tmp_path: Path) -> None:
    plan = _plan(tmp_path, special_bits=True)
    applied = orch("apply", plan, cwd=tmp_path, timeout=120)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "(mode 04755)" in applied.stdout
    mode = (tmp_path / "helper").stat().st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o4755
    again = orch("plan", plan, "--detailed-exitcode", cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr  # converged: the probe reads 4755
