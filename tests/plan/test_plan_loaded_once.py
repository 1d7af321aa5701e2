"""A command loads its plan once: `orch plan`, `orch apply` and `orch validate` learn whether a
plan has a matrix from the same load that the apply (or the check) then uses. Counted from
outside the code: a real `orch` process with an audit hook that counts each time the plan
file is opened (the loader reads a file once per load)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_COUNTING = """
import os, sys
plan = os.path.realpath(sys.argv[1])
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        if os.path.realpath(os.fsdecode(args[0])) == plan:
            opened.append(1)
sys.addaudithook(hook)
from orchestrator.cli import main
try:
    code = main(sys.argv[2:])
finally:
    print(f"plan file opened {len(opened)} times", file=sys.stderr)
sys.exit(code)
"""


def _opened(plan: str, *command: str) -> int:
    done = subprocess.run([sys.executable, "-c", _COUNTING, plan, *command, plan], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("plan file opened "), done.stderr
    return int(last.split()[3])


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_a_plain_plan_is_loaded_once(command: str) -> None:
    assert _opened("plans/sim/kimi-nvfp4.yaml", command) == 1


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_a_matrix_plan_is_loaded_once_and_each_variant_once(command: str) -> None:
    # the plan as written, then each of its four variants; `orch plan` then checks the
    # first variant with the plan its listing loaded
    assert _opened("plans/sim/kimi-nvfp4-matrix.yaml", command) == 1 + 4
