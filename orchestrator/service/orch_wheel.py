"""`orch sim serve` on the host for `engine: sim`: the controller's own orch, uploaded as a
wheel and installed into the plan's venv, both checked by digest."""

from __future__ import annotations

import hashlib

from orchestrator.facts import Facts, ProbeRequest
from orchestrator.packages import Installer
from orchestrator.plan.models import PythonEnv
from orchestrator.selfwheel import self_wheel, self_wheel_digest
from orchestrator.steps.base import Change, Step, StepPlan, Upload


def _sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


class OrchWheelStep(Step):
    name = "orch"

    def __init__(self, python: PythonEnv) -> None:
        self.python = python
        self.filename, self.data = self_wheel()
        self.digest = self_wheel_digest()
        self.wheel_path = f"{python.venv}/.orch/{self.filename}"
        self.marker = f"{python.venv}/.orch/installed-wheel.sha256"

    def request(self) -> ProbeRequest:
        return ProbeRequest(files={self.wheel_path: self.digest, self.marker: _sha(self.digest + "\n")})

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        wheel = facts.files.get(self.wheel_path)
        marker = facts.files.get(self.marker)
        installed = marker is not None and marker.exists and marker.sha256 == _sha(self.digest + "\n")
        uploaded = wheel is not None and wheel.exists and wheel.sha256 == self.digest
        if installed and uploaded:
            return result
        # The simulator needs nothing beyond the standard library: no index is asked.
        install = Installer.of(self.python).install([self.wheel_path], reinstall=True)
        result.changes.append(
            Change(
                f"install orch {self.digest[:12]} into the venv (for orch sim serve)",
                commands=[install],
                uploads=[Upload(self.wheel_path, self.data, 0o644),
                         Upload(self.marker, (self.digest + "\n").encode(), 0o644)],
            )
        )
        return result
