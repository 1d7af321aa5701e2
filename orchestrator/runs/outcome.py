"""What one host's apply ended with: each step's outcome (status, changes, findings, error)
and the host's (its steps, error, round trips, facts). The recap, the run folder and the
multi-node gate read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.events import StepEnd
from orchestrator.facts import Facts
from orchestrator.runs.run_records import HostSteps

StepStatus = Literal["ok", "changed", "pending", "failed", "skipped"]


@dataclass
class StepOutcome:
    step: str
    status: StepStatus
    changes: list[str] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    findings: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # what its commands printed, by name

    def event(self, host: str) -> StepEnd:
        return StepEnd(host, step=self.step, status=self.status, changes=list(self.changes),
                       findings=list(self.findings), seconds=round(self.seconds, 3),
                       error=self.error)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "changes": self.changes,
            "findings": self.findings,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


@dataclass
class HostOutcome:
    host: str
    steps: list[StepOutcome] = field(default_factory=list)
    error: str | None = None
    exit_code: int = 1  # of the error, when there is one (a busy lock has its own)
    round_trips: int = 0
    seconds: float = 0.0
    facts: Facts | None = None
    transport: dict[str, str] | None = None  # which transport reached it, and why
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.error is not None or any(s.status == "failed" for s in self.steps)

    @property
    def failed_step(self) -> StepOutcome | None:
        """The step or stage that failed first, if one did."""
        return next((s for s in self.steps if s.status == "failed"), None)

    @property
    def changed(self) -> int:
        return sum(1 for s in self.steps if s.status in ("changed", "pending"))

    def record(self) -> HostSteps:
        """What the run folder keeps of this host (steps.json)."""
        return HostSteps.model_validate({
            "host": self.host, "error": self.error, "round_trips": self.round_trips,
            "seconds": round(self.seconds, 3), "steps": [s.to_json() for s in self.steps],
            **self.extra,
        })
