"""The `commands:` of a plan: what no other step covers (fetch weights ahead of the start,
check the driver, set a sysctl), each guarded so a converged host does not run it again.

A guard is read by the probe in its one round trip: `creates: PATH` is met when the path
exists, `unless: ARGV` when that command exits 0. A met guard skips the command; a command
without a guard runs on every apply (say so with a guard, as with Ansible's `creates`).
The command runs under coreutils' `timeout`, never again after a dropped connection, its
output masked and kept in the run folder (`commands/<name>.log`). One that restarts the
service leaves a marker the service step reads on its re-probe.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from orchestrator import masking
from orchestrator.facts import Facts, ProbeRequest
from orchestrator.plan.models import CommandSpec
from orchestrator.plan.secrets import substitute
from orchestrator.steps.base import Change, Step, StepPlan
from orchestrator.transport.command import Command, quote_env_value

KILL_AFTER_S = 10  # SIGTERM at the timeout, SIGKILL this much later


# Reads `KEY="value"` lines from stdin into the environment, then runs the command: values
# (secrets among them) never appear on a command line, where every user of the host sees them.
_WITH_ENV = 'set -a; . /dev/stdin; set +a; exec "$@"'


def command_of(spec: CommandSpec) -> Command:
    """The host command: the argv word by word (each quoted), or `sh -c SCRIPT`; with an
    environment, that reads it from stdin first."""
    words = spec.run if spec.run is not None else ["sh", "-c", spec.shell or ""]
    if spec.env:
        words = ["sh", "-c", _WITH_ENV, "sh", *words]
    return Command("timeout", f"--kill-after={KILL_AFTER_S}", f"{spec.timeout:g}", *words)


def environment_text(spec: CommandSpec, secrets: Mapping[str, str]) -> bytes:
    """What `command_of` reads on stdin: the command's environment, secrets filled in."""
    lines = [f"{name}={quote_env_value(substitute(value, secrets))}"
             for name, value in sorted(spec.env.items())]
    return ("\n".join(lines) + "\n").encode()


def shown(spec: CommandSpec) -> str:
    """The command as a shell would read it, on one line (a script's first line and ...)."""
    if spec.run is not None:
        return masking.mask(shlex.join(spec.run))
    first, _, rest = (spec.shell or "").strip().partition("\n")
    return masking.mask(f"sh -c {shlex.quote(first + (' ...' if rest else ''))}")


class CommandsStep(Step):
    verify = False  # an unguarded command is never "converged": it runs every time

    def __init__(self, name: str, commands: list[CommandSpec], *,
                 secrets: Mapping[str, str] | None = None,
                 restart_marker: str | None = None) -> None:
        self.name = name
        self.commands = commands
        self.secrets = dict(secrets or {})
        self.restart_marker = restart_marker

    def request(self) -> ProbeRequest:
        guards: dict[str, dict[str, Any]] = {}
        for spec in self.commands:
            if spec.creates is not None:
                guards[spec.name] = {"creates": spec.creates}
            elif spec.unless is not None:
                guards[spec.name] = {"unless": spec.unless}
        return ProbeRequest(guards=guards)

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        for spec in self.commands:
            guard = facts.guards.get(spec.name)
            if guard is not None and guard.met:
                continue
            why = guard.why if guard is not None else "no guard: runs on every apply"
            commands = [command_of(spec)]
            if spec.restarts_service and self.restart_marker is not None:
                marker_dir = self.restart_marker.rpartition("/")[0] or "/"
                commands += [Command("mkdir", "-p", marker_dir), Command("touch", self.restart_marker)]
            result.changes.append(Change(
                f"run {spec.name}: {shown(spec)} ({why})", commands=commands,
                timeout=spec.timeout + KILL_AFTER_S + 30, idempotent=False,
                keep_output=spec.name,
                stdin=environment_text(spec, self.secrets) if spec.env else None))
        return result
