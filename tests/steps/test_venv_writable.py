"""A venv the login user may not write is said at plan time, before anything is installed
(a non-root user otherwise found out mid-apply): the host side asked as a real unprivileged
user (`nobody`, through runuser) about a real root-owned directory, its answer parsed, and the
python step blocked with the path, the user and the owner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.facts import Distribution, Facts
from orchestrator.facts.program import program_source
from orchestrator.facts.venv import parse
from orchestrator.plan.models import Install, PythonEnv
from orchestrator.steps.python_env import PythonEnvStep

HOST_PYTHON = "/usr/bin/python3"  # the host's own python3, as the probe runs it
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None
                                or not Path(HOST_PYTHON).exists(),
                                reason="needs root to act as another user (runuser) and /usr/bin/python3")


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A root-owned directory anyone may enter but only root may write (as /opt/venvs is)."""
    folder = Path(tempfile.mkdtemp(prefix="orch-venvs-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def asked_as(user: str, venv: Path) -> Facts:
    """The fact program orch ships, run by `user` on this machine, asked about `venv`."""
    request = {"venv": str(venv), "interpreter": "python3"}
    program = program_source() + (f"\nanswer = {{}}\ngather_venv({request!r}, answer)\n"
                                  "print(json.dumps(answer['venv']))\n")
    argv = ["runuser", "-u", user, "--", HOST_PYTHON, "-"]
    answer = json.loads(subprocess.run(argv, input=program, capture_output=True, text=True,
                                       check=True, cwd="/").stdout)
    return Facts(**parse({"venv": answer}))


def step(venv: Path) -> PythonEnvStep:
    return PythonEnvStep(PythonEnv(venv=str(venv)), Install(packages=["vllm==0.17.1"]))


def test_a_venv_under_a_directory_the_user_cannot_write_blocks_the_plan(shared: Path) -> None:
    venv = shared / "kimi" / "venv"
    facts = asked_as("nobody", venv)
    assert facts.venv is not None and not facts.venv.writable
    assert (facts.venv.write_checked, facts.venv.write_owner) == (str(shared), "root")
    planned = step(venv).plan(facts)
    assert planned.blocked == (f"cannot write the venv {venv}: the login user may not write {shared} "
                               "(owned by root); give python.venv a path that user can write (e.g. "
                               "under its home), or make the user its owner")


def test_the_same_path_for_its_owner_plans_the_install(shared: Path) -> None:
    facts = asked_as("root", shared / "kimi" / "venv")
    assert facts.venv is not None and facts.venv.writable and facts.venv.write_owner is None
    planned = step(shared / "kimi" / "venv").plan(facts)
    assert planned.blocked is None and planned.changes[0].summary.startswith("create venv")


def test_a_converged_venv_is_not_blocked_by_being_read_only(shared: Path) -> None:
    facts = asked_as("nobody", shared)  # nothing to change: reading is all the plan needs
    assert facts.venv is not None and not facts.venv.writable
    facts.venv.exists = True
    facts.venv.distributions["pip"] = Distribution("pip", "24.0")  # as a real venv holds it
    assert step(shared).plan(facts).changes  # vllm missing: a change, so it is blocked...
    no_pins = PythonEnvStep(PythonEnv(venv=str(shared)), Install(packages=[]))
    assert no_pins.plan(facts).blocked is None  # ...while nothing to do is never blocked
