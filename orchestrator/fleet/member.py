"""A replica as the fleet's moves see it (where the router reaches it), and what the apply
does to one replica on their behalf (`ReplicaOps`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from orchestrator.plan.replicas import Replica


@dataclass(frozen=True)
class Member:
    """One replica and its base URL as registered with the router."""

    replica: Replica
    url: str

    @property
    def id(self) -> str:
        return self.replica.id


class ReplicaOps(Protocol):
    """The apply's work on one replica. Each method may raise (an OrchError or any other):
    the roll records the failure and treats it as the step failing."""

    def version(self, member: Member) -> str | None:
        """What runs there now (an engine version, a launch spec hash): said before and after."""

    def update(self, member: Member) -> None:
        """Converge the replica's host to the new plan and launch the new version."""

    def ready(self, member: Member) -> bool:
        """Wait (within the plan's start-up budget) until it serves; False: it did not."""

    def smoke(self, member: Member) -> Sequence[str]:
        """The smoke checks against it: the problems found (empty: all passed)."""

    def restore(self, member: Member) -> None:
        """Bring back the previous run's frozen state (`--locked`) and launch it."""
