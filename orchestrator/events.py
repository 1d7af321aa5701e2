"""What happens during a run, as it happens: small typed events.

The runner, the stages after converge, readiness and the benchmark sweep emit them;
`output.Reporter` renders them for a person (or as JSON lines with `--json`), and the run
folder keeps each one in `events.jsonl` (`to_json()`, the same form). An event that is not
`kept` (a level's progress, several a second) is only shown live, never written or printed
as JSON: the level's end says the same, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    host: str
    kind: ClassVar[str] = "event"
    kept: ClassVar[bool] = True  # False: shown live only (not in events.jsonl or --json)

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
    step: str | None = None  # the step or stage that failed, when one did
    changed: int = 0
    round_trips: int = 0
    seconds: float = 0.0
    kind: ClassVar[str] = "host_end"


@dataclass(frozen=True)
class StageEvent(Event):
    """A stage after converge (ready, smoke, bench, collect, environment), a lock wait, or
    start-up progress. In events.jsonl: `"event": "stage"` with its `stage` (records written
    before 2026-12 say `"event": "phase"` and `phase`)."""

    stage: str = ""
    status: str = "running"  # running, ok, changed, failed, skipped
    message: str = ""
    kind: ClassVar[str] = "stage"


@dataclass(frozen=True)
class LevelStart(Event):
    """A benchmark level begins (its warm-up first)."""

    label: str = ""  # c8 (concurrency 8) or r2 (2 requests/s)
    mode: str = "closed"  # closed, batch, rate
    concurrency: int | None = None
    rate: float | None = None
    requests: int | None = None  # None: it runs for the configured duration
    kind: ClassVar[str] = "level_start"


@dataclass(frozen=True)
class LevelProgress(Event):
    """A measured level so far (from the sweep's event loop, twice a second)."""

    label: str = ""
    done: int = 0
    total: int | None = None
    failed: int = 0
    elapsed_s: float = 0.0
    streamed_tok_s: float = 0.0  # tokens streamed so far / elapsed
    kind: ClassVar[str] = "level_progress"
    kept: ClassVar[bool] = False


@dataclass(frozen=True)
class LevelEnd(Event):
    """A benchmark level is over and written. Throughput and latency are the figures the
    sweep's table shows: in model time for a simulator run (`model_time`), raw otherwise;
    the level's file has both."""

    label: str = ""
    mode: str = "closed"
    concurrency: int | None = None
    rate: float | None = None
    completed: int = 0
    failed: int = 0
    partial: bool = False
    output_throughput: float | None = None  # tok/s; None when no request completed
    mean_e2el_ms: float | None = None
    model_time: bool = False
    limiter: str | None = None  # what held the level (limits/rules.py LIMITERS); None: not judged
    kind: ClassVar[str] = "level_end"


Emit = Callable[[Event], None]
