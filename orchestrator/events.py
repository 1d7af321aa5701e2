"""What happens during a run, as it happens: small typed events.

The runner, the phases after converge and readiness emit them; `output.Reporter` renders
them for a person (or as JSON lines with `--json`), and the run folder keeps each one in
`events.jsonl` (`to_json()`, the same form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    host: str
    kind: ClassVar[str] = "event"

    def to_json(self) -> dict[str, Any]:
        return {"event": self.kind, **asdict(self)}


@dataclass(frozen=True)
class HostStart(Event):
    kind: ClassVar[str] = "host_start"


@dataclass(frozen=True)
class Probed(Event):
    seconds: float = 0.0
    kind: ClassVar[str] = "probe"


@dataclass(frozen=True)
class StepStart(Event):
    step: str = ""
    kind: ClassVar[str] = "step_start"


@dataclass(frozen=True)
class StepEnd(Event):
    step: str = ""
    status: str = "ok"  # ok, changed, pending, failed, skipped
    changes: list[str] = field(default_factory=list)
    findings: list[dict[str, str]] = field(default_factory=list)  # level, message, fix
    seconds: float = 0.0
    error: str | None = None
    kind: ClassVar[str] = "step_end"


@dataclass(frozen=True)
class Retry(Event):
    attempt: int = 0
    error: str = ""
    kind: ClassVar[str] = "retry"


@dataclass(frozen=True)
class HostEnd(Event):
    failed: bool = False
    error: str | None = None
    changed: int = 0
    round_trips: int = 0
    seconds: float = 0.0
    kind: ClassVar[str] = "host_end"


@dataclass(frozen=True)
class PhaseEvent(Event):
    """A phase after converge (ready, smoke, bench, collect) or start-up progress."""

    phase: str = ""
    status: str = "running"  # running, ok, changed, failed, skipped
    message: str = ""
    kind: ClassVar[str] = "phase"


Emit = Callable[[Event], None]
