"""~/.ssh/config and jump hosts, against the real sshd (which also serves as its own jump
host: each loopback alias is a different "host" in its log)."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from fixtures.sshd import SshServer, alias

from orchestrator.errors import HostKeyError, InventoryError
from orchestrator.inventory import HostSpec, Inventory, SshSettings
from orchestrator.transport import Command, connect
from orchestrator.transport.retry import PermanentConnectError
from orchestrator.transport.ssh import SshTransport


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return str(path)


def _dialled(sshd: SshServer, since: int) -> list[str]:
    """The server addresses connections went to, in order."""
    return re.findall(r"^Connection from \S+ port \d+ on (\S+) port", sshd.log_text(since), re.M)


def test_ssh_config_supplies_hostname_port_user_and_key(sshd: SshServer, tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        f"Host box\n  HostName {alias(2)}\n  Port {sshd.port}\n  User root\n"
        f"  IdentityFile {tmp_path}/missing_key\n  IdentityFile {sshd.key}\n",
    )
    inventory = Inventory(
        hosts={"box": HostSpec()}, ssh=SshSettings(known_hosts=str(sshd.known_hosts), config=config)
    )
    mark = sshd.log_mark()
    with connect("box", inventory) as transport:
        assert transport.run(Command("whoami")).stdout == "root\n"
    assert _dialled(sshd, mark) == [alias(2)]


def test_inventory_fields_win_over_ssh_config(sshd: SshServer, tmp_path: Path) -> None:
    config = _config(tmp_path, f"Host {alias(3)}\n  Port 1\n  User nobody\n  IdentityFile {sshd.key}\n")
    inventory = Inventory(
        hosts={"gpu": HostSpec(address=alias(3), port=sshd.port, user="root")},
        ssh=SshSettings(known_hosts=str(sshd.known_hosts), config=config),
    )
    with connect("gpu", inventory) as transport:
        assert transport.run(Command("whoami")).stdout == "root\n"


def test_missing_ssh_config_file_is_an_inventory_error(sshd: SshServer, tmp_path: Path) -> None:
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(config=str(tmp_path / "nope")))
    with pytest.raises(InventoryError, match=r"ssh.config names .*nope.*which does not exist"):
        connect("h1", inventory)


def test_proxyjump_from_ssh_config(sshd: SshServer, tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        f"Host target\n  HostName {alias(4)}\n  ProxyJump jumpbox\n"
        f"Host jumpbox\n  HostName {alias(5)}\n"
        f"Host *\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.key}\n",
    )
    inventory = Inventory(
        hosts={"target": HostSpec()},  # paramiko: its chain of connections is checked below
        ssh=SshSettings(known_hosts=str(sshd.known_hosts), config=config, transport="paramiko"),
    )
    mark = sshd.log_mark()
    with connect("target", inventory) as transport:
        assert isinstance(transport, SshTransport)
        assert transport.run(Command("echo", "through")).stdout == "through\n"
        assert [link.hop.host for link in transport.connection.links] == [alias(5), alias(4)]
        sock = transport.connection.socket()  # the controller's socket is the jump's
        assert sock is not None
        assert sock.getpeername()[0] == alias(5)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    assert _dialled(sshd, mark) == [alias(5), alias(4)]
    assert sshd.sessions(mark) == {alias(4): 1}  # the command ran on the target only


def test_auto_takes_paramiko_for_a_proxyjump_of_the_config_and_names_the_jump(
        sshd: SshServer, tmp_path: Path) -> None:
    """The ssh client would hide the jump host's own error (its stderr is dropped while a
    master is kept): auto asks the config, and paramiko names the jump host."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(f"{line}\n" for line in sshd.known_hosts.read_text()
                                   .splitlines() if f"{alias(4)}]" in line))
    config = _config(
        tmp_path,
        f"Host target\n  HostName {alias(4)}\n  ProxyJump jumpbox\n"
        f"Host jumpbox\n  HostName {alias(5)}\n"
        f"Host *\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.key}\n",
    )
    inventory = Inventory(hosts={"target": HostSpec()},
                          ssh=SshSettings(known_hosts=str(known_hosts), config=config))
    with pytest.raises(HostKeyError) as caught:
        connect("target", inventory)
    assert str(caught.value).startswith(f"jumpbox: the host key of [{alias(5)}]:{sshd.port}")


def test_jump_through_another_inventory_host(sshd: SshServer) -> None:
    inventory = Inventory(
        hosts={
            "bastion": sshd.host_spec(6),
            "gpu": sshd.host_spec(7, jump="bastion"),
        },
        ssh=sshd.ssh_settings(),
    )
    mark = sshd.log_mark()
    with connect("gpu", inventory) as transport:
        assert transport.run(Command("true")).ok
    assert _dialled(sshd, mark) == [alias(6), alias(7)]


def test_jump_to_a_destination_outside_the_inventory(sshd: SshServer, tmp_path: Path) -> None:
    config = _config(tmp_path, f"Host {alias(8)}\n  IdentityFile {sshd.key}\n")
    inventory = Inventory(
        hosts={"gpu": sshd.host_spec(9, jump=f"root@{alias(8)}:{sshd.port}")},
        ssh=sshd.ssh_settings(config=config),
    )
    mark = sshd.log_mark()
    with connect("gpu", inventory) as transport:
        assert transport.run(Command("true")).ok
    assert _dialled(sshd, mark) == [alias(8), alias(9)]


def test_the_jump_hosts_key_is_checked_too(sshd: SshServer, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    target_only = [line for line in sshd.known_hosts.read_text().splitlines() if alias(7) in line]
    known_hosts.write_text("\n".join(target_only) + "\n")
    inventory = Inventory(
        hosts={"bastion": sshd.host_spec(6), "gpu": sshd.host_spec(7, jump="bastion")},
        ssh=sshd.ssh_settings(known_hosts=str(known_hosts)),
    )
    with pytest.raises(HostKeyError) as caught:
        connect("gpu", inventory)
    assert str(caught.value).startswith(f"bastion: the host key of [{alias(6)}]:{sshd.port}")


@pytest.mark.parametrize(("client", "error", "says"), [
    ("paramiko", InventoryError, r"cannot read the ssh config .*Unparsable line =bad"),
    ("openssh", PermanentConnectError, r"cannot read the ssh config: .*line 2: .*bad"),
])
def test_unparsable_ssh_config_is_an_error_that_says_so(sshd: SshServer, tmp_path: Path,
                                                        client: str, error: type[Exception],
                                                        says: str) -> None:
    config = _config(tmp_path, "Host x\n  =bad\n")
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(config=config, transport=client))
    with pytest.raises(error, match=says) as caught:
        connect("h1", inventory)
    assert "config: false" in (getattr(caught.value, "hint", "") or "")


@pytest.mark.parametrize("client", ["paramiko", "openssh"])
def test_user_given_twice_is_an_inventory_error(sshd: SshServer, client: str) -> None:
    inventory = sshd.inventory(1, address=f"root@{alias(1)}",
                               ssh=sshd.ssh_settings(transport=client))
    with pytest.raises(InventoryError, match="host 'h1': cannot build its SSH connection"):
        connect("h1", inventory)
