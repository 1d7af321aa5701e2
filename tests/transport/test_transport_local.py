"""The local transport: real subprocesses and real files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.errors import CommandFailed, InventoryError
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.transport import Command, connect
from orchestrator.transport.local import LocalTransport


@pytest.fixture
def local() -> LocalTransport:
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    assert isinstance(transport, LocalTransport)
    return transport


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


def test_forward_is_the_identity(local: LocalTransport) -> None:
    with local.forward(8000) as port:
        assert port == 8000


def test_unknown_host_is_an_inventory_error() -> None:
    with pytest.raises(InventoryError, match="no host named 'nope'"):
        connect("nope", Inventory(hosts={"here": HostSpec(connection="local")}))
