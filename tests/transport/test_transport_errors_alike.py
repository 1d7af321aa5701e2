"""What a user reads when a host cannot be reached is the same kind of error, naming the host
and what to fix, whichever SSH client `ssh.transport` (or `auto`) gives it: a wrong or
missing key, an unknown or changed host key, a refused port, a port that answers but is
not sshd, or stays silent. Against the real sshd."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from fixtures.sshd import SshServer, alias, free_port, make_keys

from orchestrator.errors import AuthError, ConnectError, HostKeyError, TransportError
from orchestrator.inventory import Inventory
from orchestrator.transport import connect
from orchestrator.transport.retry import Backoff, PermanentConnectError

FAST = Backoff(first=0.01, maximum=0.05)
CLIENTS = ["paramiko", "openssh"]


def _failure(inventory: Inventory, client: str) -> tuple[TransportError, list[int]]:
    """The error connecting h1 with `client` raises, and the retries it took."""
    calls: list[int] = []
    settings = inventory.ssh.model_copy(update={"transport": client})
    with pytest.raises(TransportError) as caught:
        connect("h1", inventory.model_copy(update={"ssh": settings}),
                on_retry=lambda host, attempt, error: calls.append(attempt), backoff=FAST)
    return caught.value, calls


@pytest.mark.parametrize("client", CLIENTS)
def test_a_wrong_key_is_an_auth_error_at_once(sshd: SshServer, tmp_path: Path,
                                               client: str) -> None:
    other = make_keys(tmp_path / "other").client_key
    error, retries = _failure(sshd.inventory(1, identity_file=str(other)), client)
    assert isinstance(error, AuthError) and retries == []
    assert str(error).startswith("h1: authentication failed")
    assert "identity_file" in (error.hint or "")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_missing_key_file_is_named(sshd: SshServer, tmp_path: Path, client: str) -> None:
    error, retries = _failure(sshd.inventory(1, identity_file=str(tmp_path / "nope")), client)
    assert isinstance(error, AuthError) and retries == []
    assert str(error).startswith(f"h1: identity_file '{tmp_path / 'nope'}' does not exist")


@pytest.mark.parametrize("client", CLIENTS)
def test_an_unknown_host_key_says_how_to_add_it(sshd: SshServer, tmp_path: Path,
                                                client: str) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    error, retries = _failure(
        sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=str(empty))), client)
    assert isinstance(error, HostKeyError) and retries == []
    assert str(error).startswith("h1: ") and f"[{alias(1)}]:{sshd.port}" in str(error)
    assert "ssh-keyscan" in (error.hint or "") and "known_hosts: false" in (error.hint or "")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_changed_host_key_is_refused_with_the_fix(sshd: SshServer, tmp_path: Path,
                                                    client: str) -> None:
    changed = tmp_path / "known_hosts"
    changed.write_text(f"[{alias(1)}]:{sshd.port} {make_keys(tmp_path / 'x').host_public}\n")
    error, retries = _failure(
        sshd.inventory(1, ssh=sshd.ssh_settings(known_hosts=str(changed))), client)
    assert isinstance(error, HostKeyError) and retries == []
    assert "CHANGED" in str(error) and "ssh-keygen" in f"{error} {error.hint}"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_refused_port_is_retried_then_given_up(sshd: SshServer, client: str) -> None:
    port = free_port()  # nothing listens there
    error, retries = _failure(
        sshd.inventory(1, port=port, ssh=sshd.ssh_settings(connect_retries=2)), client)
    assert isinstance(error, ConnectError) and retries == [1, 2]
    text = str(error)
    assert text.startswith("h1: ") and "refused" in text.lower() and str(port) in text
    assert "(gave up after 3 attempts)" in text


@pytest.mark.parametrize("client", CLIENTS)
def test_a_port_that_answers_but_is_not_ssh_is_named_at_once(sshd: SshServer,
                                                             client: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # answers like an HTTP server
        port = listener.getsockname()[1]
        stop = threading.Event()

        def answer() -> None:
            listener.settimeout(0.1)
            while not stop.is_set():
                try:
                    peer, _ = listener.accept()
                except OSError:
                    continue
                with peer:
                    peer.recv(100)
                    peer.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        server = threading.Thread(target=answer, daemon=True)
        server.start()
        try:
            error, retries = _failure(sshd.inventory(1, address="127.0.0.1", port=port), client)
        finally:
            stop.set()
            server.join()
    assert isinstance(error, PermanentConnectError) and retries == []
    assert f"127.0.0.1:{port} accepts connections but is not an SSH server" in str(error)
    assert "HTTP/1.1 400" in str(error) and "`port`" in (error.hint or "")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_silent_port_is_named_within_its_connect_timeout(sshd: SshServer,
                                                           client: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts, never speaks
        port = listener.getsockname()[1]
        error, retries = _failure(sshd.inventory(1, address="127.0.0.1", port=port,
                                                 connect_timeout=1.0), client)
    assert isinstance(error, PermanentConnectError) and retries == []
    assert f"127.0.0.1:{port} accepted the connection but sent no SSH banner within" in str(error)
