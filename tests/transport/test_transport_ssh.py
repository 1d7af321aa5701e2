"""The SSH transport against a real sshd on loopback: commands, files, round trips."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest
from fixtures.sshd import SshServer

from orchestrator.errors import CommandFailed
from orchestrator.transport import Command, connect
from orchestrator.transport.local import LocalTransport
from orchestrator.transport.ssh import SshTransport, atomic_write_command


def test_killed_command_is_not_a_dropped_connection(ssh: SshTransport) -> None:
    result = ssh.run(Command.script("kill -9 $$"), check=False)
    assert result.returncode == -1
    assert ssh.run(Command("true")).ok


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
