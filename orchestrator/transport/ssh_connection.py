"""Build and open the fabric connection chain to one host.

A target (see `target.py`) becomes a chain of `fabric.Connection`s: the jump hosts first,
then the host. fabric resolves `~/.ssh/config` (HostName, User, Port, IdentityFile,
ProxyJump); this module then makes every hop of the chain, including jump hosts fabric
created from `ProxyJump`, check host keys the same way, and opens the hops one by one so a
failure names the hop that failed.

Two things paramiko does not do by itself:
- TCP_NODELAY. Without it every command pays Nagle plus delayed ACK (~40 ms on loopback);
  the socket of the first hop is created here, with TCP_NODELAY, before the SSH handshake.
- Host keys. fabric accepts any host key; here `known_hosts` is loaded and an unknown key
  is rejected (`UnknownHostKey`) unless the inventory says `ssh: {known_hosts: false}`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fabric
import paramiko

from orchestrator import local_files
from orchestrator.errors import InventoryError
from orchestrator.inventory import SshSettings
from orchestrator.transport.ssh_config import KEEPALIVE_SECONDS, known_hosts_path, named_config
from orchestrator.transport.ssh_errors import Hop, UnknownHostKey, translate
from orchestrator.transport.target import SshTarget, identity_path

log = logging.getLogger("orchestrator.transport")



class RejectUnknownHostKeys(paramiko.MissingHostKeyPolicy):
    """OpenSSH's StrictHostKeyChecking=yes: a host not in known_hosts is refused."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise UnknownHostKey(hostname, key)


@dataclass
class Link:
    """One hop of the chain with what messages about it need."""

    conn: fabric.Connection
    hop: Hop
    timeout: float


def fabric_config(settings: SshSettings) -> fabric.Config:
    """A fabric config that honours the inventory's `ssh.config` setting."""
    if settings.config is False:
        return fabric.Config(overrides={"load_ssh_configs": False})
    path = named_config(settings) or os.path.expanduser(settings.config)
    try:
        # Like OpenSSH: the user's file, then /etc/ssh/ssh_config for what it leaves unset.
        return fabric.Config(user_ssh_path=path)
    except (paramiko.SSHException, OSError, ValueError) as error:
        raise InventoryError(
            f"cannot read the ssh config ({settings.config} or /etc/ssh/ssh_config): {error}",
            hint="fix the file, or set `ssh: {config: false}` to ignore ssh config files",
        ) from error


class SshConnection:
    """The chain of connections to one host; `open()` (re)connects what is not connected."""

    def __init__(self, target: SshTarget, settings: SshSettings, *, nodelay: bool = True) -> None:
        self.target = target
        self.nodelay = nodelay
        self.known_hosts = known_hosts_path(settings)
        self.links = _build_links(target, fabric_config(settings), self.known_hosts)

    @property
    def final(self) -> Link:
        return self.links[-1]

    def is_open(self) -> bool:
        transport = self.final.conn.transport
        return transport is not None and bool(transport.is_active())

    def transport(self) -> paramiko.Transport:
        """The SSH transport of the host, opening the chain if needed (translated errors)."""
        if not self.is_open():
            self.open()
        transport: paramiko.Transport | None = self.final.conn.transport
        assert transport is not None
        return transport

    def open(self) -> None:
        for link in self.links:
            if link.conn.is_connected:
                continue
            self._open_link(link)

    def _open_link(self, link: Link) -> None:
        conn = link.conn
        _close_quietly(conn)
        first_hop = not conn.gateway
        started = time.monotonic()
        try:
            if first_hop:
                conn.connect_kwargs["sock"] = self._tcp_socket(link)
            conn.open()
        except Exception as error:  # translated below; programming errors re-raise there
            authenticating = _authenticating(conn.client)
            silent = _silent(conn.client, time.monotonic() - started, link.timeout)
            _close_quietly(conn)
            raise translate(error, link.hop, authenticating=authenticating,
                            silent_for=link.timeout if silent else None) from error
        finally:
            conn.connect_kwargs.pop("sock", None)
        assert conn.transport is not None
        conn.transport.set_keepalive(KEEPALIVE_SECONDS)
        log.debug("%s: connected to %s", link.hop.name, link.hop.where)

    def _tcp_socket(self, link: Link) -> socket.socket:
        sock = socket.create_connection((link.hop.host, link.hop.port), timeout=link.timeout)
        if self.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def socket(self) -> socket.socket | None:
        """The TCP socket the controller dialled (the first hop's), if connected."""
        transport = self.links[0].conn.transport
        sock = getattr(transport, "sock", None) if transport is not None else None
        return sock if isinstance(sock, socket.socket) else None

    def close(self) -> None:
        for link in reversed(self.links):
            _close_quietly(link.conn)


def _authenticating(client: paramiko.SSHClient) -> bool:
    """True between an accepted host key and successful authentication."""
    transport = client.get_transport()
    return (
        transport is not None
        and transport.is_active()
        and transport.host_key is not None
        and not transport.is_authenticated()
    )


def _silent(client: paramiko.SSHClient, waited: float, timeout: float) -> bool:
    """True when the peer took the TCP connection and then said nothing for the whole
    timeout: no SSH banner came (a hung sshd, or a service that waits for its client to
    speak first). A peer that closes at once (sshd's MaxStartups) is not silent."""
    transport = client.get_transport()
    return transport is not None and not transport.remote_version and waited >= timeout


def _close_quietly(conn: fabric.Connection) -> None:
    try:
        conn.client.close()
    except Exception:  # closing a broken connection may fail in many ways
        log.debug("closing %s failed", conn.host, exc_info=True)
    conn.transport = None


def _build_links(target: SshTarget, config: fabric.Config, known_hosts: str | None) -> list[Link]:
    gateway: fabric.Connection | None = None
    final: fabric.Connection | None = None
    explicit: dict[int, SshTarget] = {}
    for step in target.hops():
        identity = identity_path(step) if step.identity_file else None
        try:
            conn = fabric.Connection(
                step.host,
                user=step.user,
                port=step.port,
                config=config,
                # None lets fabric take ProxyJump/ProxyCommand from the ssh config.
                gateway=gateway,
                connect_kwargs={"key_filename": [identity]} if identity else {},
            )
        except (paramiko.SSHException, ValueError) as error:
            # e.g. "user@host" in `address` as well as `user:`, or a failed canonicalization
            raise InventoryError(
                f"host {step.name!r}: cannot build its SSH connection: {error}",
                hint="give `address` as a bare host name or IP, with `user` and `port` apart",
            ) from error
        explicit[id(conn)] = step
        gateway = final = conn
    assert final is not None
    chain = [final]
    while isinstance(chain[0].gateway, fabric.Connection):
        chain.insert(0, chain[0].gateway)
    links = []
    for index, conn in enumerate(chain):
        hop_target = explicit.get(id(conn))
        timeout = hop_target.connect_timeout if hop_target else target.connect_timeout
        name = hop_target.name if hop_target else str(conn.original_host)
        _prepare(conn, known_hosts, timeout)
        hop = Hop(
            name=name,
            host=str(conn.host),
            port=int(conn.port),
            user=str(conn.user),
            known_hosts=known_hosts,
            via_jump=index > 0 or isinstance(conn.gateway, str),
        )
        links.append(Link(conn=conn, hop=hop, timeout=timeout))
    return links


def load_known_hosts(keys: paramiko.HostKeys, path: str) -> None:
    """Add the entries of a known_hosts file to `keys`, skipping lines paramiko cannot read
    (as OpenSSH does; paramiko's own loader rejects the whole file for one bad line).
    `@cert-authority` and `@revoked` lines are skipped: paramiko supports neither."""
    try:
        # never a FIFO (a read that waits forever) or a device: local_files reads only files
        text = local_files.read_text(Path(path), errors="replace")
    except FileNotFoundError:
        return  # every host is then unknown, and the error names the file
    except OSError as error:
        raise InventoryError(f"cannot read known_hosts file {path}: {error.strerror}") from error
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "@")):
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(stripped, number)
        except (paramiko.hostkeys.InvalidHostKey, paramiko.SSHException, ValueError):
            entry = None
        if entry is None or entry.key is None:
            log.warning("%s:%d: skipped a known_hosts line that cannot be read", path, number)
            continue
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)




def _prepare(conn: fabric.Connection, known_hosts: str | None, timeout: float) -> None:
    """Host key checking, timeouts and usable key files for one hop."""
    client: paramiko.SSHClient = conn.client
    if known_hosts is None:
        # Explicit opt-out (`ssh: {known_hosts: false}`): accept and remember in memory only.
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    else:
        load_known_hosts(client.get_host_keys(), known_hosts)
        client.set_missing_host_key_policy(RejectUnknownHostKeys())
    # fabric would truncate a fractional timeout to an int; pass ours to paramiko as is.
    conn.connect_timeout = timeout
    kwargs: dict[str, Any] = conn.connect_kwargs
    kwargs.update(banner_timeout=timeout, auth_timeout=timeout, channel_timeout=timeout)
    # IdentityFile lines of the ssh config may name keys that do not exist; OpenSSH skips
    # them, paramiko would fail on them.
    keys = [os.path.expanduser(str(k)) for k in kwargs.get("key_filename") or []]
    existing = [k for k in dict.fromkeys(keys) if os.path.isfile(k)]
    if existing:
        kwargs["key_filename"] = existing
    else:
        kwargs.pop("key_filename", None)
