"""The whole error tree of orch.

Every failure a user can cause or meet is one of these; nothing else escapes the library
(third-party exceptions are translated at the edge that calls the third party). The CLI maps
an `OrchError` to its `exit_code` and prints `str(error)` without a traceback (`--debug`
shows one).

    OrchError
    ├── PlanError               a plan file, overlay or --set is invalid (file, line, column, field)
    ├── InventoryError          the inventory is invalid or does not name a host
    ├── SecretError             a ${env:NAME} secret is not set on the controller
    ├── RunFolderError          a run folder is missing or unreadable (--locked, compare)
    ├── TransportError          talking to a host failed
    │   ├── ConnectError        refused, reset, timed out, banner: transient, retried
    │   ├── AuthError           authentication failed: permanent, says what to fix
    │   ├── HostKeyError        unknown or changed host key: permanent
    │   └── CommandFailed       a remote command exited non-zero where it had to succeed
    ├── ProbeError              the fact-gathering program failed or printed garbage
    ├── LockBusy                another apply holds the host's apply lock
    ├── LockError               a lock file or its folder cannot be used (a symlink, not writable)
    ├── StepError               a step could not apply its changes
    │   └── StepDidNotConverge  re-probe after apply still shows changes
    ├── ServiceError            the model server did not come up or died
    │   ├── PreflightError      something would make the launch fail: caught before it
    │   ├── StartupFailed       the process died during start-up (diagnosis attached)
    │   ├── StartupTimeout      the start-up deadline passed (log tail attached)
    │   ├── ServiceHung         alive but not answering: stopped (SIGSTOP) or silent after its API was up
    │   └── CrashLoop           the restart budget is spent
    ├── ServerUnreachable       the model server's HTTP API gave no answer (refused, timed out)
    ├── SmokeFailed             a smoke check's expectation did not hold
    ├── BenchError              a benchmark could not run at all (levels keep their own errors)
    └── UsageError              options that contradict each other (exit 64, as argparse's)

    Interrupted (a KeyboardInterrupt)  Ctrl-C, SIGTERM or SIGHUP: exit 130, 143 or 129, run
                                       folder interrupted
"""

from __future__ import annotations

import signal
from typing import Any

from orchestrator.exit_codes import ExitCode


class OrchError(Exception):
    """Base of every error orch reports to a user."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class PlanError(OrchError):
    """An invalid plan. Carries the position so the message can point at the source."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        snippet: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        self.expected = expected
        self.snippet = snippet

    def __str__(self) -> str:
        where = self.file or "<plan>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        parts = [f"{where}: {self.message}"]
        if self.field:
            parts.append(f"  field: {self.field}")
        if self.expected:
            parts.append(f"  expected: {self.expected}")
        if self.snippet:
            parts.append(self.snippet)
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


class InventoryError(OrchError):
    pass


class SecretError(OrchError):
    pass


class RunFolderError(OrchError):
    pass


class TransportError(OrchError):
    def __init__(self, message: str, *, host: str = "", hint: str | None = None) -> None:
        super().__init__(f"{host}: {message}" if host else message, hint=hint)
        self.host = host


class ConnectError(TransportError):
    """Transient: the host may answer on a later try."""


class AuthError(TransportError):
    pass


class HostKeyError(TransportError):
    pass


class CommandFailed(TransportError):
    def __init__(
        self,
        command: str,
        exit_code: int,
        stderr: str,
        *,
        host: str = "",
        hint: str | None = None,
    ) -> None:
        tail = stderr.strip().splitlines()[-15:]
        detail = ("\n    " + "\n    ".join(tail)) if tail else ""
        super().__init__(
            f"command failed with exit code {exit_code}: {command}{detail}", host=host, hint=hint
        )
        self.command = command
        self.returncode = exit_code
        self.stderr = stderr


class ProbeError(OrchError):
    pass


class StepError(OrchError):
    pass


class StepDidNotConverge(StepError):
    pass


class ServiceError(OrchError):
    def __init__(
        self, message: str, *, hint: str | None = None, diagnoses: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.diagnoses = diagnoses or []  # what the log showed (service/diagnosis.py), as JSON


class PreflightError(ServiceError):
    pass


class StartupFailed(ServiceError):
    pass


class StartupTimeout(ServiceError):
    pass


class ServiceHung(ServiceError):
    """The server process is alive but will not answer: stopped (state T), or silent since
    its API came up."""


class CrashLoop(ServiceError):
    pass


class LockBusy(OrchError):
    """Another apply of the same service holds the lock on the host."""

    exit_code = ExitCode.LOCKED


class LockError(OrchError):
    """A lock file on the host cannot be used: a symlink, not a regular file, its folder
    missing or not writable (the message names the host and the path)."""


class ServerUnreachable(OrchError):
    """No HTTP answer from the model server; `reason` names the failure (ConnectError, ...)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SmokeFailed(OrchError):
    pass


class BenchError(OrchError):
    pass


class UsageError(OrchError):
    """Options that contradict each other, or one that would have no effect."""

    exit_code = ExitCode.USAGE


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (SIGINT: Ctrl-C, SIGTERM: `timeout`, `kill`, SIGHUP: a
    closed terminal or ssh session)."""

    def __init__(self, signum: int = 2) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"
