"""What the replicas' runs tell the router's: each replica that ends ready or failed, so that
the router starts once `min_ready` serve and registers every other one as it becomes ready.
Threads: each replica's run ends in its own; the router's waits here."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from orchestrator.plan.replicas import Replica

_POLL_S = 0.2  # the router's thread wakes this often while it waits: Ctrl-C is never held


@dataclass
class ReplicaGate:
    replicas: Sequence[Replica]
    min_ready: int
    ready: list[Replica] = field(default_factory=list)  # in the order they became ready
    failed: dict[str, str] = field(default_factory=dict)  # replica id -> why
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def ended(self, replica_id: str, error: str | None) -> None:
        """A replica's run ended: ready (no error) or not."""
        with self._changed:
            found = next(r for r in self.replicas if r.id == replica_id)
            if error is None:
                self.ready.append(found)
            else:
                self.failed[replica_id] = error
            self._changed.notify_all()

    @property
    def done(self) -> bool:
        return len(self.ready) + len(self.failed) >= len(self.replicas)

    def wait_start(self, *, every: bool = False) -> bool:
        """Until `min_ready` replicas serve (`every`: until every replica's run ended);
        whether the router may start (False: too few can ever be ready)."""
        with self._changed:
            while True:
                if len(self.ready) >= self.min_ready and (not every or self.done):
                    return True
                if len(self.replicas) - len(self.failed) < self.min_ready or self.done:
                    return len(self.ready) >= self.min_ready
                self._changed.wait(_POLL_S)

    def as_ready(self) -> Iterator[Replica]:
        """Every replica that is or becomes ready, each once, until every run ended."""
        given = 0
        while True:
            with self._changed:
                while given == len(self.ready) and not self.done:
                    self._changed.wait(_POLL_S)
                fresh, finished = self.ready[given:], self.done
            for replica in fresh:
                given += 1
                yield replica
            if finished and given == len(self.ready):
                return
