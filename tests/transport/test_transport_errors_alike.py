"""What a user reads when a host cannot be reached is the same kind of error, naming the host
and what to fix, whichever SSH client `ssh.transport` (or `auto`) gives it: a wrong or
missing key, an unknown or changed host key, a refused port. Against the real sshd."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.sshd import SshServer, alias, free_port, make_keys

from orchestrator.errors import AuthError, ConnectError, HostKeyError, TransportError
from orchestrator.inventory import Inventory
from orchestrator.transport import connect
from orchestrator.transport.retry import Backoff

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
