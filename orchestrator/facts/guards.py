"""The guards of the plan's commands: `creates` is met when its path exists, `unless` when its
command exits 0; a met guard skips its command."""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any, Dict

from orchestrator.facts.fact import Fact

# == host side: shipped to the host (stdlib only, Python 3.8) ==

GUARD_TIMEOUT_S = 30.0


def guard_facts(guards: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """name -> {"met": bool, "why": str}: `creates` met when the path exists, `unless` when
    its argv exits 0 (within GUARD_TIMEOUT_S; a missing program is not met)."""
    out: Dict[str, Dict[str, Any]] = {}
    for name, guard in guards.items():
        if guard.get("creates"):
            path = guard["creates"]
            exists = os.path.lexists(path)
            out[name] = {"met": exists, "why": f"{path} exists" if exists else f"{path} is missing"}
        elif guard.get("unless"):
            argv = [str(word) for word in guard["unless"]]
            try:
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, timeout=GUARD_TIMEOUT_S, check=False)
                code: Any = done.returncode
            except FileNotFoundError:
                code = "not found"
            except (OSError, subprocess.SubprocessError) as error:
                code = type(error).__name__
            out[name] = {"met": code == 0, "why": f"`unless` exited {code}"}
    return out


def gather_guards(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["guards"]`: command name -> {"creates": path} or {"unless": argv}."""
    if request.get("guards"):
        answer["guards"] = guard_facts(request["guards"])


# == controller side ==


@dataclass(frozen=True)
class Guard:
    """A command's guard as the probe found it: met (skip the command) or not, and why."""

    met: bool
    why: str


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    return {"guards": {name: Guard(met=bool(guard.get("met")), why=str(guard.get("why", "")))
                       for name, guard in (answer.get("guards") or {}).items()}}


FACT = Fact(gather="gather_guards", parse=parse)
