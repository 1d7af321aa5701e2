"""A worker node stays in the run until the head's run ends, then answers for itself.

A worker's own steps end early: once its Ray node (or its headless mp server) has started,
it has nothing left to do while the head waits for readiness, smoke-tests and benchmarks.
If the worker is cut off after that (the node dies, its process is killed, its connection is
lost), the head's server fails, and a recap that took the worker's word from before would
show the worker `changed` and only the head failed.

So a worker's run waits for the head's to end (the gate says when, and whether it failed).
When the head's run failed, the worker looks at its own processes once, in one round trip:

- its host does not answer: the worker's run fails, `cut off during the apply` with the
  transport's words (its logs cannot be collected either);
- a process of it is dead: a failed `node` step names the process and the last line of its
  log, and the collect stage after it brings the log into the run folder (hosts/<node>/);
- everything of it runs: the failure was the head's own; nothing is added.

When the head's run succeeded, nothing is asked (no round trip): the group served to the end.

Before that, while the group forms (a worker that started its Ray node in this run, until the
head sees the cluster whole or its run ends), the worker looks at its Ray node every
`_FORMING_POLL_S`: one that died at its start (a port it may not take, a bad Ray argument)
is reported to the gate, and the head stops waiting for it at its next poll instead of
waiting out the join timeout.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass

from orchestrator.cluster.gate import ClusterError, Gate
from orchestrator.errors import OrchError
from orchestrator.events import Emit, StageEvent
from orchestrator.facts import Facts
from orchestrator.runs.outcome import HostOutcome, StepOutcome
from orchestrator.service.backends import watch_command
from orchestrator.service.lock import LockGuard
from orchestrator.service.step import ServiceStep
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, Raw

_PAST_ANY_LOG = 1 << 62  # watch_command's log offset: its state line only, no log bytes
_TAIL_LINES = 20  # of a dead process's log, for the last line worth showing
_ANSWER_S = 60.0
_FORMING_POLL_S = 2.0


@dataclass
class NodeWatch:
    """A stage of a worker node's run (apply/converge.py: Stage), before its collect."""

    gate: Gate
    host: str
    units: list[ServiceStep]  # the node's supervised processes (its Ray node, or its server)

    def __call__(self, transport: Transport, facts: Facts, outcome: HostOutcome,
                 emit: Emit, guard: LockGuard) -> None:
        if outcome.failed or not self.units:
            return  # its own failure says it already; nothing of it was started
        head = self.gate.topology.head.host
        rays = [unit for unit in self.units if unit.unit is not None]
        if any(s.step == unit.name and s.status == "changed"
               for s in outcome.steps for unit in rays):
            self._watch_forming(transport, head, rays)
        head_failed, _ = self.gate.ended(head)
        if not head_failed:
            return
        started = time.monotonic()
        dead: list[str] = []
        for unit in self.units:
            try:
                result = transport.run(unit_state_command(unit), check=False, timeout=_ANSWER_S)
            except OrchError as error:
                said = str(error).removeprefix(f"{self.host}: ")
                raise ClusterError(
                    f"{self.host}: cut off during the apply: {said}",
                    hint=f"the head {head} failed with it; once {self.host} answers again, "
                         "orch apply PLAN restarts the group") from error
            state, error_line = parse_unit_state(result.stdout)
            if state == "dead":
                said = f"; its log: {error_line}" if error_line else \
                    "; its log names no error (killed, or out of memory?)"
                dead.append(f"{_what(unit)} (unit {unit.paths.name}) died during the "
                            f"apply{said}")
        if not dead:
            return
        why = "dropped out of the group: " + "; ".join(dead)
        step = StepOutcome(step="node", status="failed", seconds=time.monotonic() - started,
                           error=why)
        outcome.steps.append(step)
        emit(StageEvent(self.host, stage="node", status="failed", message=why))

    def _watch_forming(self, transport: Transport, head: str, rays: list[ServiceStep]) -> None:
        """Until the group formed or the head's run ended: a Ray node of this worker that
        died is reported to the gate (the run's own failure is said after the head's)."""
        while not self.gate.formed_or_ended(head, _FORMING_POLL_S):
            for unit in rays:
                try:
                    result = transport.run(unit_state_command(unit), check=False,
                                           timeout=_ANSWER_S)
                except OrchError:
                    return  # cut off: said below, once the head's run has ended
                state, error_line = parse_unit_state(result.stdout)
                if state == "dead":
                    said = f"; its log: {error_line}" if error_line else ""
                    self.gate.lose(self.host, f"{_what(unit)} (unit {unit.paths.name}) died "
                                              f"before the cluster formed{said}")
                    return


def _what(unit: ServiceStep) -> str:
    return "its Ray node" if unit.unit is not None else "its server"


def unit_state_command(unit: ServiceStep) -> Command:
    """One round trip: the unit's state line (alive, frozen PID, stopped, dead), then the end
    of its log, base64 on a line of its own."""
    state = watch_command(unit.backend, unit.paths, _PAST_ANY_LOG)
    return Command(state.parts, Raw(f"; echo; tail -n {_TAIL_LINES}"), unit.paths.log,
                   Raw("2>/dev/null | base64 -w0; echo"))


# A line of a log that says what went wrong: a logged error, an exception's last line.
_ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL|FATAL|Fatal|fatal)\b|^\w+(Error|Exception)\b|"
                         r"\w+(Error|Exception): ")


def parse_unit_state(stdout: str) -> tuple[str, str]:
    """(state, the last line of the log's end that names an error, or "") from
    `unit_state_command`. A process killed from outside leaves no such line."""
    lines = stdout.split("\n")
    state = lines[0].split()[0] if lines and lines[0].strip() else "unknown"
    encoded = next((line for line in reversed(lines[1:]) if line.strip()), "")
    try:
        tail = base64.b64decode(encoded).decode("utf-8", "replace")
    except ValueError:
        tail = ""
    found = next((line.strip() for line in reversed(tail.splitlines())
                  if _ERROR_LINE.search(line.strip())), "")
    return state, found[:300]
