"""The OpenSSH transport (`ssh: {transport: openssh}`): the `ssh` client, one master
connection per host shared by every command (ControlMaster) and kept open for
`ssh.control_persist` seconds after the run (ControlPersist), as Ansible does.

A re-apply within that time pays no handshake and does not import paramiko: a command is
one `ssh` process that talks to the master over its socket (~/.orch/ssh/, 0700) and costs
one round trip. The master is the same for every orch process of this user, so two applies
share it; the locks on the host still keep them apart. Behaviour is the paramiko
transport's (the contract tests run on both): quoting by `Command`, `put` in one round trip,
`hold` for the lock program, `forward` through `ssh -W` per tunnel connection.

ssh says what failed on stderr with exit code 255; `classify` turns that into the errors of
`orchestrator.errors` (refused and reset are retried, keys and auth are not). A command that
itself exits 255 without an ssh message stays a command result.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

from orchestrator import masking
from orchestrator.errors import AuthError, CommandFailed, ConnectError, HostKeyError, TransportError
from orchestrator.inventory import SshSettings
from orchestrator.transport.banner import no_banner_error, not_ssh, not_ssh_error
from orchestrator.transport.base import Held, Result, Transport, connection_lost, timed_out
from orchestrator.transport.command import Command, atomic_write_command
from orchestrator.transport.openssh_args import client_argv
from orchestrator.transport.retry import (
    Backoff,
    PermanentConnectError,
    RetryCallback,
    call_with_retries,
)
from orchestrator.transport.target import SshTarget
from orchestrator.transport.tunnel import Channel, local_forward

SSH_FAILED = 255  # ssh's own exit code for a connection or authentication failure
CONTROL_FOLDER = "~/.orch/ssh"
_CHUNK = 64 * 1024
_ERR_KEPT = 8 * 1024  # of a held command's stderr: ssh's message is its last lines
_ENDING_S = 2.0  # for a held ssh whose output ended to exit
_MASTER_GONE_S = 0.5  # for a master whose connection died to remove its socket (it takes ms)
_NOT_RUN = re.compile(  # failures before the remote command could start: safe to repeat
    r"connection refused|connection timed out|timed out during banner|no route to host|"
    r"network is unreachable|kex_exchange_identification|could not resolve|"
    r"connection reset|connection closed by .* port \d+$", re.IGNORECASE | re.MULTILINE)
_LOST = re.compile(r"broken pipe|connection to \S+ closed|client_loop|mux_client|"
                   r"control socket|closed by remote host|connection closed", re.IGNORECASE)


def classify(stderr: str, host: str, target: SshTarget | None = None) -> TransportError | None:
    """The transport error ssh's stderr describes (exit code 255), or None when the 255 is
    the remote command's own. With the `target`, a port that answers but is not sshd is
    named as paramiko names it (not retried)."""
    lines = [line.strip() for line in stderr.splitlines()
             if line.strip() and not line.strip().startswith("@")]  # not ssh's banner of @s
    said = " ".join(" ".join(lines).split())[:800]
    if "IDENTIFICATION HAS CHANGED" in stderr:
        return HostKeyError(f"the host key has CHANGED since known_hosts recorded it: {said}",
                            host=host, hint="if the host was re-installed, remove its old key "
                            "as ssh says above; otherwise do not connect")
    if "host key verification failed" in said.lower():
        return HostKeyError(f"host key verification failed: {said}", host=host,
                            hint="add the host's key to the inventory's known_hosts file "
                                 "(ssh-keyscan), or set `ssh: {known_hosts: false}`")
    if "permission denied" in said.lower():
        return AuthError(f"authentication failed: {said}", host=host,
                         hint="check the inventory's user and identity_file")
    if "bad configuration option" in said.lower():  # ~/.ssh/config or the inventory's
        return PermanentConnectError(f"cannot read the ssh config: {said}", host=host,
                                     hint="fix the file, or set `ssh: {config: false}` to "
                                          "ignore ssh config files")
    if "could not resolve hostname" in said.lower():
        return PermanentConnectError(f"cannot resolve the address: {said}", host=host,
                                     hint="check the inventory's address")
    not_sshd = _not_sshd(said, host, target)
    if not_sshd is not None:
        return not_sshd
    if _NOT_RUN.search(stderr) or _LOST.search(stderr) or said.startswith("ssh:"):
        return ConnectError(f"ssh: {said.removeprefix('ssh: ')}", host=host)
    return None


def _not_sshd(said: str, host: str, target: SshTarget | None) -> TransportError | None:
    """ssh's words for a peer that gave no SSH banner: silent until ssh gave up, or closed
    (an HTTP server answers the client's banner, then closes; so does an overloaded sshd,
    whose next try may work: the port is asked what it is)."""
    if target is None or target.jump is not None:
        return None
    port = target.port or 22
    if "timed out during banner exchange" in said:
        return no_banner_error(host, target.host, port, target.connect_timeout)
    if "kex_exchange_identification" in said or "banner line" in said:
        answer = not_ssh(target.host, port)
        if answer is not None:
            return not_ssh_error(host, target.host, port, answer)
    return None


class OpensshTransport(Transport):
    """A host reached with the OpenSSH client; thread-safe (each call is its own process)."""

    def __init__(self, host: str, target: SshTarget, settings: SshSettings, *,
                 on_retry: RetryCallback | None = None, backoff: Backoff | None = None) -> None:
        super().__init__(host)
        if shutil.which("ssh") is None:
            raise ConnectError("ssh.transport is openssh, but this machine has no `ssh` client",
                               host=host, hint="install openssh-client, or use transport: paramiko")
        folder = os.path.expanduser(CONTROL_FOLDER)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        self.target = target
        self.argv, self.control_path = client_argv(target, settings, folder)
        self.retries = settings.connect_retries
        self.backoff = backoff or Backoff()
        self.on_retry = on_retry

    def open(self) -> None:
        """Check the master connection (its socket answers: no process, no round trip);
        start one when there is none, so connection failures are reported (and retried)
        here, before any command."""
        if self.control_path is None or not _listening(self.control_path):
            self.run(Command("true"))
            self.round_trips -= 1  # the connection, not a command of the run

    # -- commands ---------------------------------------------------------------------

    def run(self, command: Command, *, stdin: bytes | None = None, timeout: float | None = None,
            check: bool = True, idempotent: bool = True) -> Result:
        shown = str(command)
        started = time.monotonic()
        returncode, out, err = self._exec(command.raw(), shown, stdin, timeout, idempotent)
        self.round_trips += 1
        result = Result(command=shown, returncode=returncode, stdout=out.decode(errors="replace"),
                        stderr=err.decode(errors="replace"), duration=time.monotonic() - started)
        if check and returncode != 0:
            raise CommandFailed(shown, returncode, masking.mask(result.stderr), host=self.host)
        return result

    def put(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        self.run(atomic_write_command(remote_path, mode), stdin=data)

    def get(self, remote_path: str) -> bytes:
        command = Command("cat", "--", remote_path)
        returncode, out, err = self._exec(command.raw(), str(command), None, None, True)
        self.round_trips += 1
        if returncode != 0:
            raise CommandFailed(str(command), returncode,
                                masking.mask(err.decode(errors="replace")), host=self.host)
        return out

    def _exec(self, text: str, shown: str, stdin: bytes | None, timeout: float | None,
              idempotent: bool) -> tuple[int, bytes, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout

        def attempt() -> tuple[int, bytes, bytes]:
            process = subprocess.Popen(
                [*self.argv, text], stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
            try:
                out, err, done = _communicate(process, stdin or b"", deadline)
            finally:
                if process.poll() is None:
                    process.kill()
                process.wait()
            if not done:
                raise timed_out(shown, err, timeout, self.host)
            if process.returncode == SSH_FAILED:
                failure = classify(err.decode(errors="replace"), self.host, self.target)
                if failure is not None:
                    if not idempotent and not _NOT_RUN.search(err.decode(errors="replace")):
                        raise PermanentConnectError(
                            f"the connection was lost while running: {shown}; it was not run "
                            f"again because it is not safe to repeat ({failure})", host=self.host,
                            hint="check the host's state, then run again")
                    raise failure
            return process.returncode, out, err

        return call_with_retries(attempt, host=self.host, retries=self.retries,
                                 backoff=self.backoff, on_retry=self.on_retry)

    def hold(self, command: Command, *, stdin: bytes | None = None) -> Held:
        # Its input is a pipe only this process writes: when orch ends, however it ends, the
        # pipe closes, ssh sends end-of-file, and the held command ends on the host.
        process = subprocess.Popen([*self.argv, command.raw()], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.round_trips += 1
        if stdin and process.stdin is not None:
            with contextlib.suppress(OSError):  # it ended already: its output says why
                process.stdin.write(stdin)
        return _ProcessHeld(process, self.host, self.control_path)

    # -- port forwarding --------------------------------------------------------------

    @contextlib.contextmanager
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Iterator[int]:
        def open_channel(dest: tuple[str, int], origin: tuple[str, int]) -> Channel:
            process = subprocess.Popen(
                [*self.argv[:-2], "-W", f"{dest[0]}:{dest[1]}", *self.argv[-2:]],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                bufsize=0)
            return _ProcessChannel(process)

        with local_forward(open_channel, (remote_host, remote_port), name=self.host) as port:
            yield port


def _listening(path: str) -> bool:
    """Whether a master connection listens on its control socket (a stale socket left by
    a dead one refuses; ssh replaces it)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


def _communicate(process: subprocess.Popen[bytes], data: bytes,
                 deadline: float | None) -> tuple[bytes, bytes, bool]:
    """Feed stdin, read stdout and stderr until both end: (out, err, ended before the
    deadline). Not `Popen.communicate`: after a timeout the master connection still holds
    the pipes (ssh hands them to it), so waiting for their end would outlast the timeout."""
    assert process.stdout is not None and process.stderr is not None
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    readers = [out_fd, err_fd]
    pending = memoryview(data)
    writer = process.stdin.fileno() if process.stdin is not None else None
    ended = True
    try:
        while readers:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                ended = False
                break
            ready, writable, _ = select.select(readers, [writer] if writer is not None else [],
                                               [], left)
            for fd in ready:
                chunk = os.read(fd, _CHUNK)
                if chunk:
                    chunks[fd].append(chunk)
                else:
                    readers.remove(fd)
            if writable and writer is not None:
                try:
                    pending = pending[os.write(writer, pending[:_CHUNK]):]
                except BrokenPipeError:  # it stopped reading: its exit status says why
                    pending = pending[:0]
                if not pending:
                    assert process.stdin is not None
                    process.stdin.close()  # end of input
                    writer = None
    finally:
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), ended


class _ProcessHeld(Held):
    """A held `ssh`: its stdout read line by line, its stderr kept (the last few KB, read as
    it comes so it never fills) for `failure`."""

    def __init__(self, process: subprocess.Popen[bytes], host: str,
                 control_path: str | None) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.process, self.host, self.control_path = process, host, control_path
        self.buffer = b""
        self.err = b""
        self.err_open = True
        self.ended = False  # its output ended: the command, or ssh, is done

    def line(self, timeout: float | None = None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        assert self.process.stdout is not None and self.process.stderr is not None
        out_fd, err_fd = self.process.stdout.fileno(), self.process.stderr.fileno()
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([out_fd, err_fd] if self.err_open else [out_fd], [], [],
                                        wait)
            if not ready:
                return None
            if err_fd in ready:
                self._read_err(err_fd)
            if out_fd in ready:
                chunk = os.read(out_fd, _CHUNK)
                if not chunk:
                    self.ended = True
                    return None
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace")

    def _read_err(self, fd: int) -> None:
        chunk = os.read(fd, _CHUNK)
        self.err_open = bool(chunk)
        self.err = (self.err + chunk)[-_ERR_KEPT:]

    def failure(self) -> TransportError | None:
        """ssh's own failure (exit code 255 and its message), once the command has ended."""
        if not self.ended:
            return None  # it still runs
        try:
            returncode = self.process.wait(_ENDING_S)
        except subprocess.TimeoutExpired:
            return None
        assert self.process.stderr is not None
        while self.err_open:  # ssh has exited: what is left of its stderr is there to read
            self._read_err(self.process.stderr.fileno())
        if returncode != SSH_FAILED:
            return None
        said = classify(self.err.decode(errors="replace"), self.host)
        if said is None and self.control_path is not None and not self._master_alive():
            # a command over a master that died exits 255 and says nothing
            return connection_lost(self.host, " (ssh's master connection ended)")
        return said

    def _master_alive(self) -> bool:
        """Whether the master still answers (it closes its clients' sessions, then exits)."""
        deadline = time.monotonic() + _MASTER_GONE_S
        while self.control_path is not None and _listening(self.control_path):
            if time.monotonic() > deadline:
                return True
            time.sleep(0.02)
        return False

    def release(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


class _ProcessChannel:
    """An `ssh -W` process as the tunnel's channel: its stdout and stdin are the stream."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process, self.stdin, self.stdout = process, process.stdin, process.stdout

    def fileno(self) -> int:
        return self.stdout.fileno()

    def recv(self, nbytes: int) -> bytes:
        return os.read(self.stdout.fileno(), nbytes)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.stdin.fileno(), view):]

    def shutdown_write(self) -> None:
        self.stdin.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stdin.close()
        self.process.kill()
        self.process.wait()
        self.stdout.close()
