"""The local transport: the host is this machine (`connection: local`).

Same contract as SSH so steps do not care where they run: commands go through a shell
(bash when present, else /bin/sh, as an SSH login shell would), `put` is an atomic write
(temporary file in the same directory, then `os.replace`), `forward` is the identity.
A command that outlives its `timeout` is killed with its whole process group and raises
`CommandFailed` with exit code 124.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from orchestrator import local_files, masking
from orchestrator.errors import CommandFailed
from orchestrator.transport.base import Held, Result, Transport, no_forward, timed_out
from orchestrator.transport.command import Command


def default_shell() -> str:
    return shutil.which("bash") or "/bin/sh"


class LocalTransport(Transport):
    """Runs on the controller itself."""

    def __init__(self, host: str = "localhost", *, shell: str | None = None) -> None:
        super().__init__(host)
        self.shell = shell or default_shell()

    def run(
        self,
        command: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        idempotent: bool = True,  # nothing to reconnect locally; accepted for symmetry
    ) -> Result:
        shown = str(command)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                [self.shell, "-c", command.raw()],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # so a timeout can kill the command's children too
            )
        except OSError as error:
            raise CommandFailed(
                shown, 127, f"cannot start {self.shell}: {error.strerror}", host=self.host
            ) from error
        try:
            out, err = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            _, err = _leftovers(process)
            raise timed_out(shown, err, timeout, self.host) from None
        except BaseException:
            _kill_group(process)  # Ctrl-C: do not leave the command running
            process.wait()
            raise
        self.round_trips += 1
        result = Result(
            command=shown,
            returncode=process.returncode,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            duration=time.monotonic() - started,
        )
        if check and result.returncode != 0:
            raise CommandFailed(shown, result.returncode, masking.mask(result.stderr), host=self.host)
        return result

    def put(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        path = Path(remote_path)
        self.round_trips += 1
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # mkstemp creates the file 0600: a secret is never readable by others meanwhile.
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    os.fchmod(handle.fileno(), mode)
                os.replace(temp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as error:
            raise CommandFailed(
                f"put {remote_path}", 1, f"{error.filename or remote_path}: {error.strerror}",
                host=self.host,
            ) from error

    def get(self, remote_path: str) -> bytes:
        self.round_trips += 1
        try:
            return local_files.read_bytes(Path(remote_path))
        except OSError as error:
            raise CommandFailed(
                f"get {remote_path}", 1, f"{remote_path}: {error.strerror}", host=self.host
            ) from error

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> contextlib.AbstractContextManager[int]:
        # The host is this machine: its ports are already ours.
        return no_forward(remote_port)

    def hold(self, command: Command, *, stdin: bytes | None = None) -> Held:
        self.round_trips += 1
        try:
            process = subprocess.Popen(
                [self.shell, "-c", command.raw()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as error:
            raise CommandFailed(str(command), 127, f"cannot start {self.shell}: {error.strerror}",
                                host=self.host) from error
        if stdin and process.stdin is not None:
            with contextlib.suppress(OSError):  # it ended already: its output says why
                process.stdin.write(stdin)
                process.stdin.flush()
        return _LocalHeld(process)


class _LocalHeld(Held):
    """A held local command's output, read from its pipe's descriptor into a buffer of our
    own: a buffered readline after select would keep a burst's later lines (nvidia-smi
    writes one per GPU at once) in Python's buffer, unseen by the next select."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.buffer = b""
        self.ended = False

    def line(self, timeout: float | None = None) -> str | None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if self.ended:
                if not self.buffer:
                    return None
                rest, self.buffer = self.buffer, b""  # a last line without its newline
                return rest.decode(errors="replace")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if chunk:
                self.buffer += chunk
            else:
                self.ended = True
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace")

    def release(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(self.process)
            self.process.wait()


def _leftovers(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """What a killed command wrote; bounded, since a child that left the process group
    could hold the pipes open forever."""
    try:
        return process.communicate(timeout=2.0)
    except subprocess.TimeoutExpired:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()
        return b"", b""


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
