"""What the roll and the repair say as they go: stage lines the reporter already shows
(`b  roll  running  draining (3 in flight)`, b being the replica), kept in events.jsonl as `"event": "roll"` or
`"event": "fleet"` with the replica and the step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from orchestrator.events import StageEvent


@dataclass(frozen=True)
class RollStep(StageEvent):
    """One step of one replica's swap: draining, updating, ready, smoke, back in, restored;
    or the roll's own start and end (replica "")."""

    replica: str = ""
    step: str = ""
    kind: ClassVar[str] = "roll"


@dataclass(frozen=True)
class FleetRepair(StageEvent):
    """What `reconcile` did: a replica registered again, a router that came back."""

    replica: str = ""
    kind: ClassVar[str] = "fleet"


def roll_step(member_id: str, step: str, detail: str, status: str = "running") -> RollStep:
    """`b  roll  running  draining (3 in flight)`."""
    return RollStep(member_id, stage="roll", status=status, message=f"{step} ({detail})"
                    if detail else step, replica=member_id, step=step)
