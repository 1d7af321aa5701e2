"""Translate paramiko, socket and OSError failures into orch errors, with what to fix.

This is the edge: nothing from paramiko, invoke or socket travels past the SSH transport.
Classification follows one rule: a failure that a later attempt can cure is a
`ConnectError` (retried by `retry.py`); authentication and host keys fail at once.
"""

from __future__ import annotations

import base64
import hashlib
import shlex
import socket
from dataclasses import dataclass

import paramiko

from orchestrator.errors import AuthError, ConnectError, HostKeyError, TransportError
from orchestrator.transport.banner import no_banner_error, not_ssh, not_ssh_error
from orchestrator.transport.retry import PermanentConnectError


class UnknownHostKey(paramiko.SSHException):
    """Raised by our missing-host-key policy; carries what the message needs."""

    def __init__(self, key_name: str, key: paramiko.PKey) -> None:
        super().__init__(f"host key for {key_name} is not known")
        self.key_name = key_name
        self.key = key


@dataclass(frozen=True)
class Hop:
    """What a message about one hop of a connection needs to say."""

    name: str  # inventory name or jump text
    host: str  # resolved address
    port: int
    user: str
    known_hosts: str | None  # None: checking is off
    via_jump: bool = False

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def key_name(self) -> str:
        """The name known_hosts files this host under (OpenSSH's convention)."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def fingerprint(key: paramiko.PKey) -> str:
    """`SHA256:...` as `ssh-keygen -lf` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def keyscan_command(hop: Hop) -> str:
    port = "" if hop.port == 22 else f"-p {hop.port} "
    target = hop.known_hosts or "~/.ssh/known_hosts"
    return f"ssh-keyscan {port}{shlex.quote(hop.host)} >> {shlex.quote(target)}"


def translate(error: BaseException, hop: Hop, *, authenticating: bool = False,
              silent_for: float | None = None) -> TransportError:
    """The orch error for a failure while connecting to `hop`.

    `authenticating` is true when the failure came after the host key was accepted and
    before authentication succeeded: paramiko then raises plain `SSHException` for
    unusable keys, which is a permanent problem, not a transient one. `silent_for` is set
    when the peer accepted the TCP connection and sent no SSH banner for that many seconds
    (paramiko then says "No existing session" or "Error reading SSH protocol banner").
    """
    if isinstance(error, TransportError):
        return error
    if silent_for is not None and isinstance(error, paramiko.SSHException | EOFError):
        return no_banner_error(hop.name, hop.host, hop.port, silent_for, hop.via_jump)
    # In this order: a key or authentication failure is an SSHException (or OSError) too.
    translated = _key_or_auth_error(error, hop, authenticating)
    if translated is None:
        translated = _network_error(error, hop)
    if translated is None:
        raise error  # a programming error, not a connection failure: keep its traceback
    return translated


def _key_or_auth_error(error: BaseException, hop: Hop,
                       authenticating: bool) -> TransportError | None:
    """Host key and authentication failures: permanent, never retried."""
    if isinstance(error, UnknownHostKey):
        return _unknown_host_key(error, hop)
    if isinstance(error, paramiko.BadHostKeyException):
        return _changed_host_key(error, hop)
    if isinstance(error, paramiko.PasswordRequiredException):
        return AuthError(
            f"the private key for {hop.where} is encrypted and no passphrase was given",
            host=hop.name,
            hint="load the key into ssh-agent (ssh-add KEY) or use an unencrypted key",
        )
    if isinstance(error, paramiko.AuthenticationException) or (
        authenticating and isinstance(error, paramiko.SSHException)
    ):
        return AuthError(
            f"authentication failed for {hop.where}: {error or 'no key was accepted'}",
            host=hop.name,
            hint=(
                "check `user` and `identity_file` for this host in the inventory (or User "
                "and IdentityFile in ~/.ssh/config), and that the public key is in the "
                "host's ~/.ssh/authorized_keys"
            ),
        )
    return None


def _network_error(error: BaseException, hop: Hop) -> TransportError | None:
    """Name resolution, sockets and the SSH protocol: retried unless no retry can cure it."""
    name = hop.name
    if isinstance(error, socket.gaierror):
        return PermanentConnectError(
            f"cannot resolve host name {hop.host!r}: {error.strerror or error}",
            host=name,
            hint="check `address` in the inventory or HostName in ~/.ssh/config",
        )
    if isinstance(error, paramiko.ssh_exception.IncompatiblePeer):
        return PermanentConnectError(
            f"{hop.where} offers no SSH algorithm paramiko supports: {error}", host=name
        )
    if isinstance(error, paramiko.ChannelException):
        how = "the jump host could not open a channel to" if hop.via_jump else "a channel to"
        return ConnectError(f"{how} {hop.where} failed: {error.text}", host=name)
    if isinstance(error, TimeoutError | socket.timeout):
        return ConnectError(f"timed out talking to {hop.where}", host=name)
    if isinstance(error, ConnectionRefusedError | paramiko.ssh_exception.NoValidConnectionsError):
        return ConnectError(
            f"connection to {hop.where} refused",
            host=name,
            hint="is sshd running on the host, and are the address and port right?",
        )
    if isinstance(error, OSError):
        return ConnectError(f"network error talking to {hop.where}: {_os_text(error)}", host=name)
    if isinstance(error, EOFError):
        return ConnectError(f"{hop.where} closed the connection", host=name)
    if isinstance(error, paramiko.SSHException):
        return _ssh_error(error, hop)
    return None


def _ssh_error(error: paramiko.SSHException, hop: Hop) -> TransportError:
    if "protocol banner" in str(error) and not hop.via_jump:
        said = not_ssh(hop.host, hop.port)
        if said is not None:  # something answers on that port, and it is not SSH
            return not_ssh_error(hop.name, hop.host, hop.port, said)
    return ConnectError(f"SSH error talking to {hop.where}: {error}", host=hop.name)


def _os_text(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def _unknown_host_key(error: UnknownHostKey, hop: Hop) -> HostKeyError:
    where = hop.known_hosts or "known_hosts"
    jump = (
        " (the host is reached through a jump host: run ssh-keyscan where the host is "
        "reachable and append its output to the file)"
        if hop.via_jump
        else ""
    )
    return HostKeyError(
        f"the host key of {error.key_name} ({error.key.get_name()} {fingerprint(error.key)}) "
        f"is not in {where}",
        host=hop.name,
        hint=(
            f"check the fingerprint, then run: {keyscan_command(hop)}{jump}; "
            "or set `ssh: {known_hosts: false}` in the inventory to turn host key "
            "checking off"
        ),
    )


def _changed_host_key(error: paramiko.BadHostKeyException, hop: Hop) -> HostKeyError:
    where = hop.known_hosts or "known_hosts"
    remove = f"ssh-keygen -R {shlex.quote(hop.key_name)} -f {shlex.quote(where)}"
    return HostKeyError(
        f"the host key of {hop.key_name} CHANGED: it offers {error.key.get_name()} "
        f"{fingerprint(error.key)}, {where} has {error.expected_key.get_name()} "
        f"{fingerprint(error.expected_key)}. Either the host was reinstalled or someone is "
        "intercepting the connection",
        host=hop.name,
        hint=f"if the change is expected: {remove} && {keyscan_command(hop)}",
    )
