"""The SSH transport: one fabric/paramiko connection per host, reused for the whole run.

Commands run on a fresh session channel of that one connection (`exec_command`), so a
command costs one network round trip plus the host's shell start-up, not a handshake.

Retries (see `retry.py`): connecting retries transient failures (refused, reset, timeout,
banner, EOF) with a bounded exponential backoff. When the connection drops while a command
runs, the transport reconnects and runs the command AGAIN. That is the default because
orch's commands are idempotent by design (converge steps check before they change, file
writes are atomic renames); a caller with a command that must not run twice passes
`idempotent=False` and gets a `ConnectError` instead. A failure before the command was
sent is always retried.

`put` writes a file in ONE round trip, atomically: the data goes over the command's stdin,
into a temporary file next to the target (created under umask 077, so a secret is never
readable by others), then `chmod` and `mv -f`, which is a rename(2) on the same filesystem.
This needs no SFTP subsystem (which would cost two more round trips to start).

A command that outlives its `timeout` raises `CommandFailed` with exit code 124; its
channel is closed, which stops a command that reads or writes it but may leave one that
ignores its terminal running.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import paramiko

from orchestrator import masking
from orchestrator.errors import CommandFailed, ConnectError, TransportError
from orchestrator.inventory import SshSettings
from orchestrator.transport.base import Held, Result, Transport, connection_lost, timed_out
from orchestrator.transport.command import Command, atomic_write_command
from orchestrator.transport.retry import (
    Backoff,
    PermanentConnectError,
    RetryCallback,
    call_with_retries,
)
from orchestrator.transport.ssh_connection import SshConnection
from orchestrator.transport.ssh_errors import translate
from orchestrator.transport.target import SshTarget
from orchestrator.transport.tunnel import Channel, local_forward

log = logging.getLogger("orchestrator.transport")

T = TypeVar("T")
SIGNALLED_EXIT_CODE = -1  # the command was killed by a signal (paramiko does not say which)
_CHUNK = 64 * 1024
_WINDOW_WAIT = 0.005  # poll interval while stdin waits for the SSH window to open
_WAKEUP_POLL = 0.05
_LOSS_SEEN_S = 1.0  # for a dead connection to show as one, once its channel closed


class _TimedOut(Exception):
    def __init__(self, stdout: bytes, stderr: bytes) -> None:
        super().__init__("timed out")
        self.stdout = stdout
        self.stderr = stderr


class SshTransport(Transport):
    """A host reached over SSH. Thread-safe for one caller thread plus forward() tunnels."""

    def __init__(
        self,
        host: str,
        target: SshTarget,
        settings: SshSettings,
        *,
        on_retry: RetryCallback | None = None,
        backoff: Backoff | None = None,
        nodelay: bool = True,
    ) -> None:
        super().__init__(host)
        self.connection = SshConnection(target, settings, nodelay=nodelay)
        self.retries = settings.connect_retries
        self.backoff = backoff or Backoff()
        self.on_retry = on_retry
        self._lock = threading.RLock()  # one (re)connect at a time
        self._ever_connected = False

    # -- connection -------------------------------------------------------------------

    def open(self) -> None:
        """Connect now (with retries) rather than on first use."""
        self._retrying(self._session_transport)

    def _session_transport(self) -> paramiko.Transport:
        with self._lock:
            if self._ever_connected and not self.connection.is_open():
                # Reported as a failed attempt, so the retry is visible (on_retry, log).
                self.connection.close()
                self._ever_connected = False
                raise ConnectError("the connection was lost", host=self.host)
            transport = self.connection.transport()
            self._ever_connected = True
            return transport

    def _forget_connection(self) -> None:
        """After a failure on the connection: the next attempt opens a new one."""
        with self._lock:
            self.connection.close()
            self._ever_connected = False

    def _retrying(self, attempt: Callable[[], T]) -> T:
        return call_with_retries(
            attempt,
            host=self.host,
            retries=self.retries,
            backoff=self.backoff,
            on_retry=self.on_retry,
        )

    @property
    def local_address(self) -> tuple[str, int] | None:
        """The controller's end of the TCP connection (tests find sshd's side with it)."""
        sock = self.connection.socket()
        try:
            address = sock.getsockname() if sock is not None else None
        except OSError:  # closed meanwhile
            return None
        return (str(address[0]), int(address[1])) if address else None

    def close(self) -> None:
        self._forget_connection()

    # -- commands ---------------------------------------------------------------------

    def run(
        self,
        command: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        idempotent: bool = True,
    ) -> Result:
        shown = str(command)
        started = time.monotonic()
        returncode, out, err = self._exec(command.raw(), shown, stdin, timeout, idempotent)
        self.round_trips += 1
        result = Result(
            command=shown,
            returncode=returncode,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            duration=time.monotonic() - started,
        )
        if check and returncode != 0:
            raise CommandFailed(shown, returncode, masking.mask(result.stderr), host=self.host)
        return result

    def put(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        command = atomic_write_command(remote_path, mode)
        returncode, _, err = self._exec(command.raw(), str(command), data, None, True)
        self.round_trips += 1
        if returncode != 0:
            raise CommandFailed(
                str(command), returncode, masking.mask(err.decode(errors="replace")), host=self.host
            )

    def get(self, remote_path: str) -> bytes:
        command = Command("cat", "--", remote_path)
        returncode, out, err = self._exec(command.raw(), str(command), None, None, True)
        self.round_trips += 1
        if returncode != 0:
            raise CommandFailed(
                str(command), returncode, masking.mask(err.decode(errors="replace")), host=self.host
            )
        return out

    def _exec(
        self, text: str, shown: str, stdin: bytes | None, timeout: float | None, idempotent: bool
    ) -> tuple[int, bytes, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout

        def attempt() -> tuple[int, bytes, bytes]:
            transport = self._session_transport()
            return self._exec_once(transport, text, shown, stdin, deadline, idempotent)

        try:
            return self._retrying(attempt)
        except _TimedOut as late:
            raise timed_out(shown, late.stderr, timeout, self.host) from None

    def _exec_once(
        self,
        transport: paramiko.Transport,
        text: str,
        shown: str,
        stdin: bytes | None,
        deadline: float | None,
        idempotent: bool,
    ) -> tuple[int, bytes, bytes]:
        hop = self.connection.final.hop
        if _remaining(deadline) == 0.0:  # spent on earlier attempts
            raise _TimedOut(b"", b"")
        try:
            channel = transport.open_session(timeout=_remaining(deadline))
        except Exception as error:  # nothing ran yet: always safe to retry
            self._forget_connection()
            raise translate(error, hop) from error
        try:
            channel.exec_command(text)
            status, out, err = _collect(channel, stdin, deadline)
            if status is None:
                if transport.is_active():
                    # OpenSSH sends exit-signal, which paramiko ignores: killed by a signal.
                    return SIGNALLED_EXIT_CODE, out, err
                raise EOFError("the connection closed before the command finished")
            return status, out, err
        except _TimedOut:
            raise
        except Exception as error:
            lost = translate(error, hop)
            self._forget_connection()
            if idempotent:
                raise lost from error
            raise PermanentConnectError(  # permanent: retrying is exactly what must not happen
                f"the connection was lost while running: {shown}; it was not run again "
                "because it is not safe to repeat",
                host=self.host,
                hint="check the host's state, then run again",
            ) from error
        finally:
            _close_channel(channel)

    def hold(self, command: Command, *, stdin: bytes | None = None) -> Held:
        def attempt() -> paramiko.Channel:
            transport = self._session_transport()
            try:
                channel = transport.open_session()
                channel.exec_command(command.raw())
            except Exception as error:  # nothing ran yet: safe to retry
                self._forget_connection()
                raise translate(error, self.connection.final.hop) from error
            return channel

        channel = self._retrying(attempt)
        self.round_trips += 1
        if stdin:
            with contextlib.suppress(Exception):  # it ended already: its output says why
                channel.sendall(stdin)
        return _SshHeld(channel, self.host)

    # -- port forwarding --------------------------------------------------------------

    @contextlib.contextmanager
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Iterator[int]:
        def open_channel(dest: tuple[str, int], origin: tuple[str, int]) -> Channel:
            transport = self._retrying(self._session_transport)
            try:
                channel: paramiko.Channel = transport.open_channel("direct-tcpip", dest, origin)
            except Exception as error:
                raise translate(error, self.connection.final.hop) from error
            return channel

        with local_forward(open_channel, (remote_host, remote_port), name=self.host) as port:
            yield port


class _SshHeld(Held):
    def __init__(self, channel: paramiko.Channel, host: str) -> None:
        self.channel, self.host = channel, host
        self.buffer = b""

    def line(self, timeout: float | None = None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            try:
                if self.channel.recv_ready():
                    chunk = self.channel.recv(_CHUNK)
                    if not chunk:
                        return None
                    self.buffer += chunk
                    continue
                if self.channel.eof_received or self.channel.closed:
                    return None
            except Exception:  # a dead connection: the held command is gone with it
                return None
            wait = _remaining(deadline)
            if wait == 0.0:
                return None
            select.select([self.channel.fileno()], [], [], _WAKEUP_POLL if wait is None else min(wait, _WAKEUP_POLL))
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace")

    def failure(self) -> TransportError | None:
        """A channel that ended with no exit status on a dead connection: the connection's."""
        if not (self.channel.closed or self.channel.eof_received):
            return None  # it still runs
        transport = self.channel.get_transport()
        deadline = time.monotonic() + _LOSS_SEEN_S  # paramiko closes channels, then the transport
        while self.channel.exit_status == -1 and transport is not None and transport.is_active() \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.channel.exit_status != -1 or (transport is not None and transport.is_active()):
            return None
        return connection_lost(self.host)

    def release(self) -> None:
        with contextlib.suppress(Exception):
            self.channel.shutdown_write()
            self.channel.status_event.wait(5)
        _close_channel(self.channel)


def _close_channel(channel: paramiko.Channel) -> None:
    # Closing sends a message, which fails on a dead connection; the failure that matters
    # is the one already being handled.
    with contextlib.suppress(Exception):
        channel.close()


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def _collect(
    channel: paramiko.Channel, stdin: bytes | None, deadline: float | None
) -> tuple[int | None, bytes, bytes]:
    """Feed stdin and read stdout and stderr together (no deadlock on full buffers) until the
    command exits. Returns exit status None when the channel closed without one (signal or
    dropped connection); raises `_TimedOut` at the deadline."""
    out: list[bytes] = []
    err: list[bytes] = []
    pending = memoryview(stdin or b"")
    if not pending:
        channel.shutdown_write()
    wakeup = channel.fileno()  # readable when data, EOF or close arrives
    while True:
        while channel.recv_ready():
            out.append(channel.recv(_CHUNK))
        while channel.recv_stderr_ready():
            err.append(channel.recv_stderr(_CHUNK))
        if channel.eof_received or channel.closed:
            # Output is complete (EOF covers both streams); data that arrived just before
            # the EOF is still buffered.
            while channel.recv_ready():
                out.append(channel.recv(_CHUNK))
            while channel.recv_stderr_ready():
                err.append(channel.recv_stderr(_CHUNK))
            break
        if pending and channel.send_ready():
            sent = channel.send(bytes(pending[:_CHUNK]))
            pending = pending[sent:]
            if not pending:
                channel.shutdown_write()
        wait = _remaining(deadline)
        if wait == 0.0:
            raise _TimedOut(b"".join(out), b"".join(err))
        # paramiko's wakeup pipe can miss an event when data arrives while it is being
        # cleared; the bounded wait makes such a miss cost milliseconds, not a hang.
        poll = _WINDOW_WAIT if pending else _WAKEUP_POLL
        select.select([wakeup], [], [], poll if wait is None else min(wait, poll))
    # The exit status follows EOF; a close without one also sets the event.
    if not channel.status_event.wait(_remaining(deadline)):
        raise _TimedOut(b"".join(out), b"".join(err))
    status = int(channel.exit_status)  # -1 until an exit-status message arrived
    return (status if status >= 0 else None), b"".join(out), b"".join(err)
