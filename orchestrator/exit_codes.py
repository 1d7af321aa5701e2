"""Exit codes of every orch command: the one table scripts and CI can rely on.

docs/cli.md prints this table; a test keeps the two equal.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # done; converged; the plans are the same
    ERROR = 1  # anything failed (the message says what and where)
    CHANGES = 2  # a difference found, when asked: `orch plan --detailed-exitcode`, `orch diff --exit-code`
    UNHEALTHY = 3  # `orch status`: a service is not running or not answering
    DEGRADED = 4  # a fleet's apply: it serves, with fewer replicas than it has (min_ready)
    USAGE = 64  # bad command line (EX_USAGE): unknown option, missing argument
    LOCKED = 75  # another apply holds a host's lock (EX_TEMPFAIL: try again later, or --wait)
    HANGUP = 129  # SIGHUP (128 + SIGHUP): the terminal or ssh session closed; as Ctrl-C
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); the run folder says "interrupted"
    TERMINATED = 143  # SIGTERM (128 + SIGTERM), handled as Ctrl-C


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success: done, planned (changes pending or not), or the plans are the same",
    ExitCode.ERROR: "an error (the message names what, where, and a hint)",
    ExitCode.CHANGES: "`orch plan --detailed-exitcode`: changes are pending; `orch diff --exit-code`: "
                      "the plans differ",
    ExitCode.UNHEALTHY: "`orch status`: a service is not running or not answering",
    ExitCode.DEGRADED: "a fleet's apply: the router serves with fewer replicas than the plan "
                       "has (at least `replicas.min_ready`); fleet.json names the missing ones",
    ExitCode.USAGE: "bad command line: unknown option, missing or malformed argument",
    ExitCode.LOCKED: "another apply (or `orch stop`) holds a host's lock (`--wait` waits for "
                     "it) or the run folder to `--resume`; an apply whose lock another's "
                     "`--break-lock` took (`orch stop --break-lock` included)",
    ExitCode.HANGUP: "hung up (SIGHUP: the terminal or ssh session closed), ended as Ctrl-C would",
    ExitCode.INTERRUPTED: "interrupted by Ctrl-C (SIGINT); finished work is kept",
    ExitCode.TERMINATED: "terminated by SIGTERM, ended as Ctrl-C would",
}


def table() -> str:
    """The exit codes as lines of `orch --help`'s epilog."""
    return "\n".join(f"  {int(code):>3}  {MEANINGS[code]}" for code in ExitCode)
