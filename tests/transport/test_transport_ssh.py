"""The SSH transport against a real sshd on loopback: commands, files, round trips."""

from __future__ import annotations

import hashlib
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.sshd import SshServer

from orchestrator import masking
from orchestrator.errors import CommandFailed
from orchestrator.transport import Command, Secret, connect
from orchestrator.transport.local import LocalTransport
from orchestrator.transport.ssh import SshTransport, atomic_write_command


@pytest.fixture
def ssh(sshd: SshServer) -> Iterator[SshTransport]:
    transport = connect("h1", sshd.inventory(1))
    assert isinstance(transport, SshTransport)
    yield transport
    transport.close()


def test_run_captures_output_and_exit_code(ssh: SshTransport) -> None:
    result = ssh.run(Command.script("echo out; echo err >&2; exit 3"), check=False)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.command == "echo out; echo err >&2; exit 3"


def test_arguments_are_quoted(ssh: SshTransport) -> None:
    assert ssh.run(Command("printf", "%s|", "a b", "$HOME", "it's")).stdout == "a b|$HOME|it's|"


def test_large_stdin_and_output_both_ways(ssh: SshTransport) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB, beyond one SSH window
    script = "tee /dev/stderr | sha256sum >&2; head -c 3000000 /dev/zero"
    result = ssh.run(Command.script(script), stdin=data)
    assert len(result.stdout) == 3_000_000
    assert hashlib.sha256(data).hexdigest() in result.stderr


def test_without_stdin_a_reader_sees_end_of_file(ssh: SshTransport) -> None:
    assert ssh.run(Command("cat"), timeout=5).stdout == ""


def test_timeout_raises_command_failed_124(ssh: SshTransport) -> None:
    started = time.monotonic()
    with pytest.raises(CommandFailed) as caught:
        ssh.run(Command.script("echo partial >&2; sleep 5"), timeout=0.5)
    assert time.monotonic() - started < 3
    assert caught.value.returncode == 124
    assert "partial" in str(caught.value)
    assert "timed out after 0.5 s" in str(caught.value)
    assert ssh.run(Command("echo", "still usable")).stdout == "still usable\n"


def test_failure_message_masks_secrets(ssh: SshTransport) -> None:
    masking.register("s3cr3t-value")
    try:
        with pytest.raises(CommandFailed) as caught:
            ssh.run(Command("sh", "-c", 'echo "rejected $0" >&2; exit 7', Secret("s3cr3t-value")))
        text = str(caught.value)
        assert "s3cr3t-value" not in text
        assert "exit code 7" in text
        assert "rejected ***" in text
        assert "sh -c" in text and "***" in caught.value.command
    finally:
        masking.clear()


def test_killed_command_is_not_a_dropped_connection(ssh: SshTransport) -> None:
    result = ssh.run(Command.script("kill -9 $$"), check=False)
    assert result.returncode == -1
    assert ssh.run(Command("true")).ok


def test_put_get_atomic_mode_and_parents(ssh: SshTransport, tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "conf"
    ssh.put(b"first\n", str(path), mode=0o600)
    assert path.read_bytes() == b"first\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    inode = path.stat().st_ino
    blob = bytes(range(256)) * 1024
    ssh.put(blob, str(path), mode=0o755)
    assert path.read_bytes() == blob
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert path.stat().st_ino != inode  # renamed into place
    assert [p.name for p in path.parent.iterdir()] == ["conf"]  # no temporary file left
    assert ssh.get(str(path)) == blob


def test_put_into_an_unwritable_place_fails_clearly(ssh: SshTransport, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommandFailed) as caught:
        ssh.put(b"x", str(tmp_path / "file" / "conf"))
    assert "mkdir -p" in caught.value.command
    assert "File exists" in caught.value.stderr
    with pytest.raises(CommandFailed, match="No such file or directory"):
        ssh.get(str(tmp_path / "missing"))


def test_every_run_put_get_is_one_session_on_the_server(sshd: SshServer, tmp_path: Path) -> None:
    inventory = sshd.inventory(2)
    with connect("h1", inventory) as one, connect("h2", inventory) as two:
        mark = sshd.log_mark()
        one.run(Command("true"))
        one.put(b"x", str(tmp_path / "x"))
        one.get(str(tmp_path / "x"))
        two.run(Command("true"))
        assert sshd.round_trips(inventory, since=mark) == {"h1": 3, "h2": 1}
        assert (one.round_trips, two.round_trips) == (3, 1)


def test_socket_has_tcp_nodelay(ssh: SshTransport) -> None:
    sock = ssh.connection.socket()
    assert sock is not None
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_one_connection_serves_many_commands(sshd: SshServer, ssh: SshTransport) -> None:
    mark = sshd.log_mark()
    for _ in range(5):
        ssh.run(Command("true"))
    assert "Connection from" not in sshd.log_text(mark)


@pytest.mark.parametrize(
    "relative", ["plain", "with space/and 'quote'", "a/b/c/d", "$(touch pwned)", "-dash"]
)
def test_atomic_write_script_in_a_plain_shell(tmp_path: Path, relative: str) -> None:
    """The put script itself, run by /bin/sh: any path shape, any bytes, exact mode."""
    target = tmp_path / relative
    data = bytes(range(256)) * 3
    command = atomic_write_command(str(target), 0o640)
    LocalTransport(shell="/bin/sh").run(command, stdin=data)
    assert target.read_bytes() == data
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not (tmp_path / "pwned").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_put_onto_a_directory_fails_instead_of_writing_inside(ssh: SshTransport, tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    with pytest.raises(CommandFailed):
        ssh.put(b"x", str(tmp_path / "conf"))
    assert list((tmp_path / "conf").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf"]  # temporary file removed
