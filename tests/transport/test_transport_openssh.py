"""The OpenSSH transport's own behaviour against the real sshd: the master connection shared
across processes, ssh's failures as orch errors, jump hosts and ssh config as the paramiko
transport reads them, and inventory values that must stay one value each. What every
transport promises runs in test_transport_contract.py and test_transport_forward.py."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.ports import free_port
from fixtures.sshd import SshServer, alias, make_keys
from fixtures.transports import openssh_inventory

from orchestrator.errors import AuthError, ConnectError, HostKeyError, InventoryError
from orchestrator.inventory import HostSpec, Inventory, SshSettings
from orchestrator.transport import Command, connect
from orchestrator.transport.openssh import OpensshTransport, classify
from orchestrator.transport.retry import Backoff

FAST = Backoff(first=0.01, maximum=0.05)


def _settings(sshd: SshServer, **fields: object) -> SshSettings:
    return sshd.ssh_settings(transport="openssh", control_persist=10, **fields)


def _connections(sshd: SshServer, since: int) -> list[str]:
    """The server addresses new connections went to, in order."""
    return re.findall(r"^Connection from \S+ port \d+ on (\S+) port", sshd.log_text(since), re.M)


def test_a_second_process_reuses_the_master_connection(sshd: SshServer, tmp_path: Path) -> None:
    inventory = openssh_inventory(sshd)
    with connect("h1", inventory) as transport:
        assert transport.run(Command("echo", "first")).stdout == "first\n"
    mark = sshd.log_mark()
    script = (
        "import sys; from orchestrator.inventory import Inventory; "
        "from orchestrator.transport import Command, connect; "
        "t = connect('h1', Inventory.model_validate_json(sys.stdin.read())); "
        "print(t.run(Command('echo', 'second')).stdout, end=''); "
        "print('paramiko' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], input=inventory.model_dump_json(),
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == "second\nFalse\n"  # no paramiko imported
    assert _connections(sshd, mark) == []  # no new TCP connection: the master's
    assert sum(sshd.sessions(mark).values()) == 1  # one command, one session


def test_wrong_key_is_an_auth_error_at_once(sshd: SshServer, tmp_path: Path) -> None:
    other = make_keys(tmp_path / "other").client_key
    calls: list[int] = []
    inventory = sshd.inventory(1, identity_file=str(other), ssh=_settings(sshd))
    with pytest.raises(AuthError, match=r"authentication failed.*Permission denied") as caught:
        connect("h1", inventory, on_retry=lambda h, n, e: calls.append(n), backoff=FAST)
    assert "identity_file" in (caught.value.hint or "")
    assert calls == []


def test_unknown_and_changed_host_keys_are_refused(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(HostKeyError, match="host key verification failed"):
        connect("h1", sshd.inventory(1, ssh=_settings(sshd, known_hosts=str(empty))))
    impostor = make_keys(tmp_path / "impostor")
    changed = tmp_path / "changed"
    changed.write_text(f"[{alias(1)}]:{sshd.port} {impostor.host_public}\n")
    with pytest.raises(HostKeyError, match=r"host key has CHANGED.*ssh-keygen -f .* -R "):
        connect("h1", sshd.inventory(1, ssh=_settings(sshd, known_hosts=str(changed))))


def test_refused_port_is_retried_then_gives_up(sshd: SshServer) -> None:
    port = free_port()
    calls: list[int] = []
    inventory = sshd.inventory(1, port=port, ssh=_settings(sshd, connect_retries=2))
    with pytest.raises(ConnectError, match=r"Connection refused.*\(gave up after 3 attempts\)"):
        connect("h1", inventory, on_retry=lambda h, n, e: calls.append(n), backoff=FAST)
    assert calls == [1, 2]


def test_a_command_that_exits_255_itself_is_a_command_result(sshd: SshServer) -> None:
    with connect("h1", openssh_inventory(sshd)) as transport:
        result = transport.run(Command.script("echo mine >&2; exit 255"), check=False)
    assert (result.returncode, result.stderr) == (255, "mine\n")


def test_jump_through_another_inventory_host(sshd: SshServer) -> None:
    inventory = Inventory(
        hosts={"bastion": sshd.host_spec(6), "gpu": sshd.host_spec(7, jump="bastion")},
        ssh=_settings(sshd),
    )
    mark = sshd.log_mark()
    with connect("gpu", inventory) as transport:
        assert transport.run(Command("echo", "through")).stdout == "through\n"
    assert _connections(sshd, mark) == [alias(6), alias(7)]
    assert set(sshd.sessions(mark)) == {alias(7)}  # commands ran on the target only


def test_ssh_config_supplies_what_the_inventory_leaves_out(sshd: SshServer, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(f"Host box\n  HostName {alias(2)}\n  Port {sshd.port}\n  User root\n"
                      f"  IdentityFile {sshd.key}\nHost {alias(3)}\n  Port 1\n  User nobody\n")
    mark = sshd.log_mark()
    inventory = Inventory(
        hosts={"box": HostSpec(), "gpu": HostSpec(address=alias(3), port=sshd.port, user="root",
                                                   identity_file=str(sshd.key))},
        ssh=_settings(sshd, config=str(config)))
    for name in ("box", "gpu"):  # gpu: the inventory's port and user win over the file's
        with connect(name, inventory) as transport:
            assert transport.run(Command("whoami")).stdout == "root\n"
    assert _connections(sshd, mark) == [alias(2), alias(3)]


def test_paths_with_spaces_quotes_and_percent_stay_one_path(sshd: SshServer, tmp_path: Path) -> None:
    odd = tmp_path / 'a "dir" with %h and $(id)'
    odd.mkdir()
    key, known = odd / "key %r", odd / "known hosts"
    key.write_bytes(sshd.key.read_bytes())
    key.chmod(0o600)
    known.write_text(sshd.known_hosts.read_text())
    inventory = sshd.inventory(1, identity_file=str(key), ssh=_settings(sshd, known_hosts=str(known)))
    with connect("h1", inventory) as transport:
        assert transport.run(Command("echo", "ok")).stdout == "ok\n"


@pytest.mark.parametrize(("field", "value", "says"), [
    ("address", "-oProxyCommand=touch /tmp/orch-pwned", "starts with '-'"),
    ("user", "root\nProxyCommand touch /tmp/orch-pwned", "control character"),
    ("identity_file", "/k\n", "control character"),
])
def test_values_ssh_would_misread_are_refused(sshd: SshServer, field: str, value: str,
                                              says: str) -> None:
    inventory = sshd.inventory(1, ssh=_settings(sshd), **{field: value})
    with pytest.raises(InventoryError, match=says):
        connect("h1", inventory)
    assert not Path("/tmp/orch-pwned").exists()


def test_classify_reads_ssh_messages_not_the_commands_own() -> None:
    assert classify("ssh: connect to host x port 22: Connection refused\r\n", "h") is not None
    assert isinstance(classify("root@x: Permission denied (publickey).\n", "h"), AuthError)
    assert classify("my tool failed\n", "h") is None
    assert classify("", "h") is None


def test_no_ssh_client_is_a_clear_error(sshd: SshServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConnectError, match="no `ssh` client"):
        OpensshTransport("h1", __import__("orchestrator.transport.target", fromlist=["x"])
                         .resolve_target("h1", openssh_inventory(sshd)), _settings(sshd))


def test_a_held_command_ends_when_its_controller_is_killed(sshd: SshServer, tmp_path: Path) -> None:
    """What keeps an apply's lock: killed with SIGKILL, the controller's pipe to ssh closes,
    ssh sends end-of-file, and the command it held on the host ends (the lock is freed)."""
    mark = tmp_path / "ended"
    script = (
        "import sys, time; from orchestrator.inventory import Inventory; "
        "from orchestrator.transport import Command, connect; "
        "t = connect('h1', Inventory.model_validate_json(sys.stdin.readline())); "
        f"held = t.hold(Command.script('echo up; cat; echo ended > {mark}')); "
        "print(held.line(30), flush=True); time.sleep(600)"
    )
    controller = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
    assert controller.stdin is not None and controller.stdout is not None
    controller.stdin.write(openssh_inventory(sshd).model_dump_json() + "\n")
    controller.stdin.flush()
    assert controller.stdout.readline() == "up\n"
    assert not mark.exists()
    controller.kill()
    controller.wait(10)
    deadline = time.monotonic() + 10
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.read_text() == "ended\n"
