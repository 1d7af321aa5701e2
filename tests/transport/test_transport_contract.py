"""What every transport promises, run against each: the local one (subprocesses) and SSH
(a real sshd on loopback) with paramiko, with the OpenSSH client, and with `auto` (the
default, which picks the OpenSSH client on this machine: checked below). Transport-specific
behaviour stays in test_transport_local.py, test_transport_ssh.py and
test_transport_openssh.py."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.transports import made

from orchestrator import masking
from orchestrator.errors import CommandFailed
from orchestrator.transport import Command, Secret
from orchestrator.transport.base import Transport
from orchestrator.transport.openssh import OpensshTransport


@pytest.fixture(params=["local", "paramiko", "openssh", "auto"])
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    """The shared fixture's transports, and `auto` as the default leaves it."""
    opened = made(request.param, request)
    if request.param == "auto":  # this machine has the OpenSSH client: auto takes it
        assert isinstance(opened, OpensshTransport)
        assert opened.choice is not None and opened.choice.why.startswith("auto: ssh client")
    yield opened
    opened.close()


def test_run_captures_output_and_exit_code(transport: Transport) -> None:
    result = transport.run(Command.script("echo out; echo err >&2; exit 3"), check=False)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok
    assert result.command == "echo out; echo err >&2; exit 3"
    assert transport.round_trips == 1


def test_arguments_are_quoted(transport: Transport) -> None:
    result = transport.run(Command("printf", "%s|", "a b", "$HOME", "it's", "`id`", "$(id)"))
    assert result.stdout == "a b|$HOME|it's|`id`|$(id)|"


def test_large_stdin_and_output_both_ways(transport: Transport) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB, every byte value, beyond one SSH window
    script = "tee /dev/stderr | sha256sum >&2; head -c 3000000 /dev/zero"
    result = transport.run(Command.script(script), stdin=data)
    assert len(result.stdout) == 3_000_000
    assert hashlib.sha256(data).hexdigest() in result.stderr


def test_without_stdin_a_reader_sees_end_of_file(transport: Transport) -> None:
    assert transport.run(Command("cat"), timeout=5).stdout == ""


def test_timeout_is_command_failed_124_and_the_transport_stays_usable(transport: Transport) -> None:
    started = time.monotonic()
    with pytest.raises(CommandFailed) as caught:
        transport.run(Command.script("echo partial >&2; sleep 5"), timeout=0.5)
    assert time.monotonic() - started < 3
    assert caught.value.returncode == 124
    assert "partial" in str(caught.value)
    assert "timed out after 0.5 s" in str(caught.value)
    assert transport.run(Command("echo", "still usable")).stdout == "still usable\n"


def test_failure_message_masks_secrets(transport: Transport) -> None:
    masking.register("s3cr3t-value")
    try:
        with pytest.raises(CommandFailed) as caught:
            transport.run(Command("sh", "-c", 'echo "rejected $0" >&2; exit 7', Secret("s3cr3t-value")))
        text = str(caught.value)
        assert "s3cr3t-value" not in text
        assert "exit code 7" in text
        assert "rejected ***" in text
        assert "***" in caught.value.command
    finally:
        masking.clear()


def test_put_is_atomic_with_mode_and_parents_and_get_reads_back(transport: Transport, tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "conf"
    transport.put(b"first\n", str(path), mode=0o600)
    assert path.read_bytes() == b"first\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    inode = path.stat().st_ino
    blob = bytes(range(256)) * 1024
    transport.put(blob, str(path), mode=0o755)
    assert path.read_bytes() == blob
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert path.stat().st_ino != inode  # replaced by a rename, never rewritten in place
    assert os.listdir(path.parent) == ["conf"]  # no temporary file left
    assert transport.get(str(path)) == blob


def test_put_and_get_failures_are_command_failed(transport: Transport, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommandFailed):
        transport.put(b"x", str(tmp_path / "file" / "conf"))
    with pytest.raises(CommandFailed, match="No such file or directory"):
        transport.get(str(tmp_path / "missing"))


def test_a_held_command_that_runs_or_ended_itself_is_no_connection_failure(
        transport: Transport) -> None:
    """`Held.failure` names only a lost connection: not a command still running (its `line`
    timed out), said at once, and not one that ended by itself, even with exit code 255."""
    running = transport.hold(Command.script("echo up; cat"))
    try:
        assert running.line(timeout=30) == "up"
        assert running.line(timeout=0.1) is None  # it waits on its input
        started = time.monotonic()
        assert running.failure() is None
        assert time.monotonic() - started < 0.5
    finally:
        running.release()
    ended = transport.hold(Command.script("echo up; echo bye >&2; exit 255"))
    try:
        assert ended.line(timeout=30) == "up"
        assert ended.line(timeout=30) is None
        assert ended.failure() is None
    finally:
        ended.release()
