"""What a roll did, replica by replica: plain dataclasses, written as the run folder's
`roll.json` (atomically, after every swap, so an interrupted roll leaves its record so far)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrator.runs.writer import dumps, write_file

ROLL_FILE = "roll.json"
# swapped: the new version serves; restored: the new one failed, the previous one serves
# again; restore_failed: neither serves, the replica stays out of the router; not_removed:
# the router refused to let it go (nothing touched); not_added: it serves but the router
# refused it back (`reconcile` retries); interrupted: the apply was stopped during its swap
# (it may be out of the router: `reconcile` puts it back once it serves)
Outcome = Literal["pending", "swapped", "restored", "restore_failed", "not_removed", "not_added",
                  "interrupted"]


@dataclass
class Drained:
    """The drain of one replica once out of the router."""

    in_flight: int  # requests running or waiting on it when it left the router
    seconds: float = 0.0
    timed_out: bool = False
    left: int = 0  # still in flight when the drain ended (0 unless it timed out)
    router_unanswered: int = 0  # the router's attempts to it never answered (clients gone)
    router_load: int | None = None  # the router's own load figure for it (None: not tracked)


@dataclass
class Swap:
    """One replica's swap: each phase's seconds in the order run (remove, drain, update,
    ready, smoke, add; restore and restore_ready after a failure)."""

    replica: str
    url: str
    started: float  # epoch seconds
    outcome: Outcome = "pending"
    before: str | None = None  # ReplicaOps.version before the update
    after: str | None = None  # and after it (or after the restore)
    phases: dict[str, float] = field(default_factory=dict)
    drained: Drained | None = None
    failed_at: str | None = None  # the phase that failed
    error: str | None = None
    problems: list[str] = field(default_factory=list)  # the smoke's

    @property
    def ok(self) -> bool:
        return self.outcome == "swapped"

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times `name` into `phases`, also when it raises."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(time.monotonic() - start, 3)


@dataclass
class RollRecord:
    """The whole roll: done (every replica swapped) or stopped at the first failed one."""

    started: float
    replicas: list[str]
    max_unavailable: int
    drain_timeout_s: float
    outcome: Literal["running", "done", "stopped", "interrupted"] = "running"
    finished: float | None = None
    stopped_by: str | None = None  # the replica whose failure stopped the roll
    swaps: list[Swap] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)  # never taken out (after a stop)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def write_roll(folder: Path, record: RollRecord) -> Path:
    return write_file(folder / ROLL_FILE, dumps(record.to_json()))
