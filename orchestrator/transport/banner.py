"""What a port that should be sshd says instead (both SSH clients' words for it, without
paramiko: the OpenSSH transport uses them too). A server that answers with something else
(HTTP), or accepts and stays silent, is not a transient failure: retrying it waits again
for the same answer."""

from __future__ import annotations

import socket

from orchestrator.transport.retry import PermanentConnectError

_PORT_HINT = "check `port` (and `address`) of this host in the inventory"


def not_ssh(host: str, port: int, timeout: float = 2.0) -> str | None:
    """What the port answers a client's banner, when that is not an SSH banner (None: SSH,
    or silence). The banner is sent first: a server that waits for its client to speak (HTTP)
    answers it at once, where it would say nothing to a client that only listens."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"SSH-2.0-orch_probe\r\n")
            first = sock.recv(200)
    except OSError:
        return None
    if not first or first.startswith(b"SSH-"):
        return None
    return first.decode("latin-1").splitlines()[0][:80] if first.strip() else repr(first[:40])


def not_ssh_error(name: str, host: str, port: int, said: str) -> PermanentConnectError:
    return PermanentConnectError(
        f"{host}:{port} accepts connections but is not an SSH server (it said {said!r})",
        host=name, hint=_PORT_HINT)


def no_banner_error(name: str, host: str, port: int, waited: float,
                    via_jump: bool = False) -> PermanentConnectError:
    """Not retried: each attempt would wait the whole connect_timeout again for a peer
    that, silent that long, is not an SSH server answering (or is hung)."""
    through = " (through the jump host)" if via_jump else ""
    return PermanentConnectError(
        f"{host}:{port}{through} accepted the connection but sent no SSH banner within "
        f"{waited:g} s", host=name,
        hint=f"{_PORT_HINT}: is sshd listening there? A slow or overloaded host: raise its "
             "`connect_timeout`")
