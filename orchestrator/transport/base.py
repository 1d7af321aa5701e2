"""What every transport offers: run a command, put and get files, forward a port.

One transport per host, reused for the whole run. Implementations translate every
third-party exception (paramiko, invoke, socket, OSError, subprocess) into the errors of
`orchestrator.errors` at this edge; above it there are only orch errors.
`round_trips` counts commands and file transfers, the cost a converge is designed against.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator import masking
from orchestrator.errors import CommandFailed, ConnectError, TransportError
from orchestrator.transport.command import Command

if TYPE_CHECKING:
    from orchestrator.transport.choice import TransportChoice

TIMEOUT_EXIT_CODE = 124  # what coreutils `timeout` returns


def timed_out(shown: str, stderr: bytes, timeout: float | None, host: str) -> CommandFailed:
    """The error of a command that ran past its timeout (both transports)."""
    detail = stderr.decode(errors="replace").rstrip()
    note = f"orch: timed out after {timeout:g} s"
    return CommandFailed(
        shown,
        TIMEOUT_EXIT_CODE,
        masking.mask(f"{detail}\n{note}" if detail else note),
        host=host,
        hint="raise the timeout if the command needs longer",
    )


@dataclass(frozen=True)
class Result:
    command: str  # masked text, for messages
    returncode: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Held(abc.ABC):
    """A command left running on the host while orch works (see `Transport.hold`)."""

    @abc.abstractmethod
    def line(self, timeout: float | None = None) -> str | None:
        """The command's next line of output; None when it ended (or at the timeout)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Close its input, so it ends; never raises."""

    def failure(self) -> TransportError | None:
        """Once `line` said it ended: the connection's failure that ended it, or None when
        the command itself ended, still runs (`line` timed out), or the transport cannot tell."""
        return None


def connection_lost(host: str, detail: str = "") -> ConnectError:
    """A held command's connection died under it (`Held.failure`)."""
    return ConnectError(f"the connection was lost while a command was held on the host{detail}",
                        host=host)


class Transport(abc.ABC):
    """A connection to one host."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.round_trips = 0
        self.choice: TransportChoice | None = None  # set by connect(): which one, and why

    @abc.abstractmethod
    def run(
        self,
        command: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        idempotent: bool = True,
    ) -> Result:
        """Run `command` through the host's shell. Raises CommandFailed when `check` and
        the exit code is not 0; ConnectError, AuthError, HostKeyError on connection trouble.
        A connection dropped mid-command is re-established and the command run again, unless
        `idempotent` is false (then ConnectError)."""

    @abc.abstractmethod
    def put(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        """Write `data` to `remote_path` atomically (temporary file, then rename), with `mode`.
        Creates missing parent directories."""

    @abc.abstractmethod
    def get(self, remote_path: str) -> bytes:
        """Read a remote file."""

    @abc.abstractmethod
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> contextlib.AbstractContextManager[int]:
        """A local TCP port that reaches `remote_host:remote_port` as seen from the host."""

    @abc.abstractmethod
    def hold(self, command: Command, *, stdin: bytes | None = None) -> Held:
        """Start `command` with its input kept open and return at once. It runs until
        `release()`, or until this controller goes away (the input closes with the
        connection or the process): what holds a lock on the host for one apply. `stdin` is
        written to its input first (a request, a secret: never on its command line)."""

    def close(self) -> None:  # noqa: B027 - optional for implementations
        """Release the connection."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def no_forward(port: int) -> Iterator[int]:
    """The identity forward, for transports where the host is this machine."""
    yield port
