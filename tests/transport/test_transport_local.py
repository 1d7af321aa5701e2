"""The local transport: real subprocesses and real files."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from orchestrator import masking
from orchestrator.errors import CommandFailed, InventoryError
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.transport import Command, Secret, connect
from orchestrator.transport.local import LocalTransport


@pytest.fixture
def local() -> LocalTransport:
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    assert isinstance(transport, LocalTransport)
    return transport


def test_run_captures_output_and_exit_code(local: LocalTransport) -> None:
    result = local.run(Command.script("echo out; echo err >&2; exit 3"), check=False)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok
    assert result.duration > 0
    assert local.round_trips == 1


def test_arguments_are_quoted(local: LocalTransport) -> None:
    result = local.run(Command("printf", "%s|", "a b", "$HOME", "it's"))
    assert result.stdout == "a b|$HOME|it's|"


def test_stdin_bytes_reach_the_command(local: LocalTransport) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    result = local.run(Command.script("sha256sum | cut -d' ' -f1"), stdin=data)
    import hashlib

    assert result.stdout.strip() == hashlib.sha256(data).hexdigest()


def test_without_stdin_a_reader_sees_end_of_file(local: LocalTransport) -> None:
    assert local.run(Command("cat")).stdout == ""


def test_timeout_kills_the_command_and_its_children(local: LocalTransport, tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    started = time.monotonic()
    with pytest.raises(CommandFailed) as caught:
        local.run(Command.script(f"(sleep 0.5; touch {marker}) & sleep 5"), timeout=0.2)
    assert time.monotonic() - started < 2
    assert caught.value.returncode == 124
    assert "timed out after 0.2 s" in str(caught.value)
    time.sleep(0.7)
    assert not marker.exists()  # the background child died with the group


def test_failure_message_masks_secrets(local: LocalTransport) -> None:
    masking.register("hunter2-token")
    try:
        with pytest.raises(CommandFailed) as caught:
            local.run(Command("sh", "-c", 'echo "bad token $0" >&2; exit 1', Secret("hunter2-token")))
        text = str(caught.value)
        assert "hunter2-token" not in text
        assert "***" in text
        assert "exit code 1" in text
    finally:
        masking.clear()


def test_put_is_atomic_with_mode_and_parents(local: LocalTransport, tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "conf"
    local.put(b"one", str(path), mode=0o600)
    assert path.read_bytes() == b"one"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    inode = path.stat().st_ino
    local.put(b"two", str(path), mode=0o640)
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert os.listdir(path.parent) == ["conf"]  # no temporary files left
    assert local.get(str(path)) == b"two"
    assert local.round_trips == 3


def test_put_and_get_failures_are_command_failed(local: LocalTransport, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CommandFailed, match=r"put .*file/conf"):
        local.put(b"x", str(blocker / "conf"))
    with pytest.raises(CommandFailed, match="No such file or directory"):
        local.get(str(tmp_path / "missing"))


def test_forward_is_the_identity(local: LocalTransport) -> None:
    with local.forward(8000) as port:
        assert port == 8000


def test_unknown_host_is_an_inventory_error() -> None:
    with pytest.raises(InventoryError, match="no host named 'nope'"):
        connect("nope", Inventory(hosts={"here": HostSpec(connection="local")}))
