"""How the SSH transport (paramiko) fails and recovers: every case against a real sshd (or a
real socket that misbehaves), and every error an orch error that says what to fix. The
OpenSSH client's side is in test_transport_openssh.py, what both say alike in
test_transport_errors_alike.py."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from fixtures.ports import free_port
from fixtures.silent_server import serving, silent_port
from fixtures.sshd import SshServer, make_keys

from orchestrator.errors import AuthError, ConnectError, HostKeyError
from orchestrator.inventory import Inventory
from orchestrator.transport import Command, connect
from orchestrator.transport.retry import Backoff, PermanentConnectError
from orchestrator.transport.ssh import SshTransport
from orchestrator.transport.ssh_errors import Hop, translate

FAST = Backoff(first=0.01, maximum=0.05)


class Retries:
    """Collects on_retry calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, Exception]] = []

    def __call__(self, host: str, attempt: int, error: Exception) -> None:
        self.calls.append((host, attempt, error))


def _connect(inventory: Inventory, retries: Retries | None = None, name: str = "h1") -> SshTransport:
    """`name` over paramiko, whatever the inventory's default would choose."""
    paramiko_ssh = inventory.ssh.model_copy(update={"transport": "paramiko"})
    transport = connect(name, inventory.model_copy(update={"ssh": paramiko_ssh}),
                        on_retry=retries, backoff=FAST)
    assert isinstance(transport, SshTransport)
    return transport


def test_wrong_key_is_an_auth_error_at_once(sshd: SshServer, tmp_path: Path) -> None:
    other = make_keys(tmp_path / "other").client_key
    retries = Retries()
    mark = sshd.log_mark()
    with pytest.raises(AuthError) as caught:
        _connect(sshd.inventory(1, identity_file=str(other)), retries)
    assert f"authentication failed for root@127.0.0.11:{sshd.port}" in str(caught.value)
    assert "identity_file" in (caught.value.hint or "")
    assert retries.calls == []
    assert sshd.log_text(mark).count("Connection from") == 1


def test_missing_identity_file_is_an_auth_error(sshd: SshServer, tmp_path: Path) -> None:
    with pytest.raises(AuthError, match=r"identity_file '.*nope' does not exist"):
        _connect(sshd.inventory(1, identity_file=str(tmp_path / "nope")))


def test_unknown_host_key_says_what_to_run_and_that_works(sshd: SshServer, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=str(known_hosts)))
    retries = Retries()
    with pytest.raises(HostKeyError) as caught:
        _connect(inventory, retries)
    error = caught.value
    assert f"the host key of [127.0.0.11]:{sshd.port} (ssh-ed25519 SHA256:" in str(error)
    command = f"ssh-keyscan -p {sshd.port} 127.0.0.11 >> {known_hosts}"
    assert command in (error.hint or "")
    assert "known_hosts: false" in (error.hint or "")
    assert retries.calls == []
    # Following the hint fixes it.
    subprocess.run(command, shell=True, check=True, capture_output=True, timeout=30)
    with _connect(inventory) as transport:
        assert transport.run(Command("true")).ok


def test_missing_known_hosts_file_rejects_the_host(sshd: SshServer, tmp_path: Path) -> None:
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=str(tmp_path / "absent")))
    with pytest.raises(HostKeyError, match=r"is not in .*absent"):
        _connect(inventory)


def test_changed_host_key_is_refused_with_the_fix(sshd: SshServer, tmp_path: Path) -> None:
    impostor = make_keys(tmp_path / "impostor")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.11]:{sshd.port} {impostor.host_public}\n")
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=str(known_hosts)))
    with pytest.raises(HostKeyError) as caught:
        _connect(inventory)
    assert "CHANGED" in str(caught.value)
    assert f"ssh-keygen -R '[127.0.0.11]:{sshd.port}' -f {known_hosts}" in (caught.value.hint or "")


def _state(path: Path) -> tuple[bool, float]:
    return path.exists(), path.stat().st_mtime if path.exists() else 0.0


def test_known_hosts_false_accepts_any_key_and_records_nothing(sshd: SshServer) -> None:
    user_file = Path.home() / ".ssh" / "known_hosts"
    before = _state(user_file), sshd.known_hosts.read_text()
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=False))
    with _connect(inventory) as transport:
        assert transport.run(Command("echo", "ok")).stdout == "ok\n"
    assert (_state(user_file), sshd.known_hosts.read_text()) == before


def test_refused_port_is_retried_then_gives_up(sshd: SshServer) -> None:
    port = free_port()  # nothing listens there
    inventory = sshd.inventory(1, port=port, ssh=sshd.ssh_settings(connect_retries=2))
    retries = Retries()
    with pytest.raises(ConnectError) as caught:
        _connect(inventory, retries)
    assert str(caught.value).startswith(
        f"h1: connection to root@127.0.0.11:{port} refused (gave up after 3 attempts)"
    )
    assert [(host, attempt) for host, attempt, _ in retries.calls] == [("h1", 1), ("h1", 2)]
    assert all(isinstance(error, ConnectError) for _, _, error in retries.calls)


@pytest.fixture(name="silent_server")
def _silent_server() -> Iterator[int]:
    """A TCP server that accepts and never speaks SSH (a hung sshd, a wrong service)."""
    with silent_port() as port:
        yield port


def test_no_ssh_banner_fails_once_within_the_connect_timeout(sshd: SshServer,
                                                             silent_server: int) -> None:
    """A port that accepts and stays silent is not retried: each attempt would wait the
    whole connect_timeout again (paramiko's own words, "No existing session", never show)."""
    inventory = sshd.inventory(
        1, address="127.0.0.1", port=silent_server, connect_timeout=0.5,
        ssh=sshd.ssh_settings(connect_retries=3),
    )  # fmt: skip
    retries = Retries()
    started = time.monotonic()
    with pytest.raises(PermanentConnectError) as caught:
        _connect(inventory, retries)
    elapsed = time.monotonic() - started
    assert str(caught.value).startswith(
        f"h1: 127.0.0.1:{silent_server} accepted the connection but sent no SSH banner "
        "within 0.5 s\n")
    assert "No existing session" not in str(caught.value) and "gave up" not in str(caught.value)
    assert retries.calls == []
    assert 0.5 <= elapsed < 2


def test_a_peer_that_closes_at_once_is_still_retried(sshd: SshServer) -> None:
    """sshd's MaxStartups drops a connection before its banner: that is transient."""
    with serving(lambda conn: conn.close()) as port:
        inventory = sshd.inventory(1, address="127.0.0.1", port=port,
                                   ssh=sshd.ssh_settings(connect_retries=1))
        retries = Retries()
        with pytest.raises(ConnectError, match="gave up after 2 attempts") as caught:
            _connect(inventory, retries)
        assert not isinstance(caught.value, PermanentConnectError)
        assert len(retries.calls) == 1


def _answer_as_http(conn: socket.socket) -> None:
    """Only once spoken to, and waiting long for it (nginx gives a request a minute)."""
    with conn, contextlib.suppress(OSError):
        conn.settimeout(30)
        if conn.recv(4096):
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")


def test_an_http_server_on_the_port_is_named_however_long_it_waits_for_a_request(
        sshd: SshServer) -> None:
    """orch's look at what the port is sends a client banner: an HTTP server answers it at
    once, and orch quotes the answer."""
    with serving(_answer_as_http) as port:
        inventory = sshd.inventory(1, address="127.0.0.1", port=port,
                                   ssh=sshd.ssh_settings(connect_retries=2))
        retries = Retries()
        started = time.monotonic()
        with pytest.raises(PermanentConnectError, match=r"is not an SSH server \(it said "
                           r"'HTTP/1.1 400 Bad Request'\)"):
            _connect(inventory, retries)
        assert retries.calls == [] and time.monotonic() - started < 10


@pytest.mark.slow
def test_connection_dropped_mid_command_is_recovered(sshd: SshServer) -> None:
    retries = Retries()
    inventory = sshd.inventory(1)
    with _connect(inventory, retries) as transport:
        address = transport.local_address
        assert address is not None
        killer = threading.Timer(0.3, sshd.drop, args=(address[1],))
        killer.start()
        mark = sshd.log_mark()
        result = transport.run(Command.script("sleep 0.8; echo finished"))
        killer.join()
        assert result.stdout == "finished\n"
        assert [attempt for _, attempt, _ in retries.calls] == [1]
        assert isinstance(retries.calls[0][2], ConnectError)
        assert transport.local_address != address  # a new connection
        log = sshd.log_text(mark)
        assert log.count("Starting session: command") == 2  # the command ran again
        assert transport.round_trips == 1


def test_connection_lost_while_idle_reconnects_on_next_command(sshd: SshServer) -> None:
    retries = Retries()
    with _connect(sshd.inventory(1), retries) as transport:
        address = transport.local_address
        assert address is not None
        assert sshd.drop(address[1])
        time.sleep(0.1)
        assert transport.run(Command("echo", "back")).stdout == "back\n"
        assert len(retries.calls) == 1


def test_unsafe_command_is_not_run_twice(sshd: SshServer, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    with _connect(sshd.inventory(1)) as transport:
        address = transport.local_address
        assert address is not None
        killer = threading.Timer(0.3, sshd.drop, args=(address[1],))
        killer.start()
        with pytest.raises(ConnectError, match="not run again because it is not safe to repeat"):
            transport.run(Command.script(f"echo x >> {counter}; sleep 0.8"), idempotent=False)
        killer.join()
        assert counter.read_text() == "x\n"
        assert transport.run(Command("true")).ok  # the transport itself recovers


@pytest.mark.parametrize(
    ("error", "kind", "text"),
    [
        (socket.gaierror(-2, "Name or service not known"), PermanentConnectError, "cannot resolve host name 'gpu.example'"),
        (ConnectionRefusedError(111, "Connection refused"), ConnectError, "refused"),
        (ConnectionResetError(104, "Connection reset by peer"), ConnectError, "Connection reset by peer"),
        (TimeoutError(), ConnectError, "timed out talking to"),
        (EOFError(), ConnectError, "closed the connection"),
        (paramiko.SSHException("Error reading SSH protocol banner"), ConnectError, "protocol banner"),
        (paramiko.ChannelException(2, "Connect failed"), ConnectError, "Connect failed"),
        (paramiko.AuthenticationException("Authentication failed."), AuthError, "authentication failed"),
        (paramiko.PasswordRequiredException("encrypted"), AuthError, "is encrypted"),
    ],
)
def test_translation_table(error: BaseException, kind: type[Exception], text: str) -> None:
    hop = Hop(name="gpu1", host="gpu.example", port=22, user="ubuntu", known_hosts=None)
    translated = translate(error, hop)
    assert type(translated) is kind
    assert text in str(translated)
    assert str(translated).startswith("gpu1: ")


def test_ssh_errors_while_authenticating_are_auth_errors() -> None:
    hop = Hop(name="gpu1", host="gpu.example", port=22, user="ubuntu", known_hosts=None)
    error = paramiko.SSHException("not a valid OPENSSH private key file")
    assert isinstance(translate(error, hop, authenticating=True), AuthError)
    assert type(translate(error, hop)) is ConnectError


def test_programming_errors_are_not_disguised() -> None:
    hop = Hop(name="gpu1", host="gpu.example", port=22, user="ubuntu", known_hosts=None)
    with pytest.raises(TypeError):
        translate(TypeError("bug"), hop)


def test_known_hosts_hashed_entries_and_bad_lines(sshd: SshServer, tmp_path: Path) -> None:
    """Hashed names (HashKnownHosts yes) match; a corrupt line is skipped, as OpenSSH does."""
    known_hosts = tmp_path / "known_hosts"
    line = next(x for x in sshd.known_hosts.read_text().splitlines() if "127.0.0.11]" in x)
    known_hosts.write_text(f"{line}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known_hosts)], check=True, capture_output=True)
    hashed = known_hosts.read_text()
    assert hashed.startswith("|1|")
    known_hosts.write_text(f"# comment\nbroken ssh-ed25519 AAAA!!notbase64\n{hashed}")
    inventory = sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=str(known_hosts)))
    with _connect(inventory) as transport:
        assert transport.run(Command("true")).ok
