"""What a step is: facts in, changes out.

A step declares the facts it needs (`request`), and turns facts into a `StepPlan` purely
(`plan`). An empty change list means converged. Check mode (`orch plan`) stops after
`plan`; apply executes the changes with `apply_changes` (the single write gate), then the
runner re-probes and requires an empty plan.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from orchestrator import masking
from orchestrator.errors import CommandFailed
from orchestrator.events import Emit
from orchestrator.facts import Facts, ProbeRequest
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, Raw


@dataclass(frozen=True)
class Upload:
    path: str
    data: bytes
    mode: int


@dataclass
class Change:
    """One thing that differs from the plan, and what fixes it."""

    summary: str
    commands: list[Command] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)
    diff: str = ""  # unified diff, already masked (files)
    timeout: float = 3600.0
    idempotent: bool = True  # may a dropped connection run it again?
    keep_output: str | None = None  # a name: the output goes into the run folder
    stdin: bytes | None = None  # fed to its commands (secrets travel here, never in argv)
    # Around its commands during apply (never in check mode): the start order of a
    # multi-node server (wait for the head, say that this node is up).
    before: Callable[[Transport], None] | None = None
    after: Callable[[Transport], None] | None = None
    # A change that is a conversation rather than a script, run before its commands: it may
    # show progress (the model's download).
    stream: Callable[[Transport, Emit], None] | None = None


@dataclass(frozen=True)
class Finding:
    """Something worth saying about the host that is not itself a change."""

    level: Literal["error", "warning", "info"]
    message: str
    fix: str = ""


@dataclass
class StepPlan:
    step: str
    changes: list[Change] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    blocked: str | None = None  # a reason not to apply at all (e.g. preflight errors)

    @property
    def converged(self) -> bool:
        return not self.changes


class Step(abc.ABC):
    name: str
    verify: bool = True  # must the re-probe after apply show it converged?
    # Does a change made by an earlier step change this one (check mode cannot see it)?
    follows_earlier_changes: bool = False

    @abc.abstractmethod
    def request(self) -> ProbeRequest:
        """The facts this step needs."""

    @abc.abstractmethod
    def plan(self, facts: Facts) -> StepPlan:
        """Changes that would bring the host to the plan. Pure."""


def apply_changes(
    transport: Transport, changes: list[Change], kept: dict[str, str] | None = None,
    emit: Emit | None = None, done: list[Change] | None = None,
) -> None:
    """Execute changes in order: uploads first, then the change's commands as one script
    (one round trip per change). The output of changes that keep theirs goes into `kept`
    (name -> stdout then stderr, masked), a failing one's too before CommandFailed; each
    change made goes into `done`, so a failure can name the one that failed."""
    for change in changes:
        if change.before is not None:
            change.before(transport)
        for upload in change.uploads:
            transport.put(upload.data, upload.path, mode=upload.mode)
        if change.stream is not None:
            change.stream(transport, emit or (lambda event: None))
        if change.commands:
            _run_change(transport, change, kept)
        if change.after is not None:
            change.after(transport)
        if done is not None:
            done.append(change)


def _run_change(transport: Transport, change: Change, kept: dict[str, str] | None) -> None:
    script = change.commands[0]
    for command in change.commands[1:]:
        script = Command(script.parts, Raw("&&"), command.parts)
    result = transport.run(script, stdin=change.stdin, timeout=change.timeout,
                           idempotent=change.idempotent, check=False)
    if change.keep_output is not None and kept is not None:
        kept[change.keep_output] = masking.mask(result.stdout + result.stderr)
    if result.returncode != 0:
        raise CommandFailed(str(script), result.returncode, masking.mask(result.stderr),
                            host=transport.host)
