"""A local TCP port whose connections are carried to a remote address over SSH.

`ssh -L` in a thread: a listener on 127.0.0.1 accepts clients; each client gets its own
`direct-tcpip` channel (opened by the caller-supplied `open_channel`, which reconnects a
dropped SSH connection) and a pump thread that copies bytes both ways, honouring half-close.
Accepted sockets get TCP_NODELAY: the benchmark measures token latency through the tunnel.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from orchestrator.errors import TransportError

log = logging.getLogger("orchestrator.transport")

_CHUNK = 64 * 1024
_JOIN_SECONDS = 2.0
_POLL_SECONDS = 1.0  # a safety net: stop() wakes the pumps at once


class Channel(Protocol):
    """What a tunnel needs of a paramiko channel."""

    def fileno(self) -> int: ...
    def recv(self, nbytes: int) -> bytes: ...
    def sendall(self, data: bytes) -> None: ...
    def shutdown_write(self) -> None: ...
    def close(self) -> None: ...


# (destination host, port), (originator host, port) -> an open channel, or raise
# TransportError (remote port closed, connection lost).
OpenChannel = Callable[[tuple[str, int], tuple[str, int]], Channel]


@contextlib.contextmanager
def local_forward(open_channel: OpenChannel, dest: tuple[str, int], *, name: str) -> Iterator[int]:
    """Yield a port on 127.0.0.1 that reaches `dest` through `open_channel`."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = int(listener.getsockname()[1])
    state = _Tunnels()
    acceptor = threading.Thread(
        target=_accept_loop,
        args=(listener, open_channel, dest, state, name),
        name=f"orch-forward-{name}-{port}",
        daemon=True,
    )
    acceptor.start()
    log.debug("%s: forwarding 127.0.0.1:%d -> %s:%d", name, port, *dest)
    try:
        yield port
    finally:
        state.stop()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        listener.close()
        acceptor.join(_JOIN_SECONDS)
        state.join()


class _Tunnels:
    """The live pumps, so leaving the context closes every tunnel."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopped = False
        self.live: dict[threading.Thread, tuple[socket.socket, Channel]] = {}

    def add(self, thread: threading.Thread, client: socket.socket, channel: Channel) -> bool:
        with self.lock:
            if self.stopped:
                return False
            self.live[thread] = (client, channel)
            return True

    def remove(self, thread: threading.Thread) -> None:
        with self.lock:
            self.live.pop(thread, None)

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            ends = list(self.live.values())
        for client, _channel in ends:
            # Wakes the pump's select(); the pump then sees `stopped` and closes both ends.
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)

    def join(self) -> None:
        with self.lock:
            threads = list(self.live)
        for thread in threads:
            thread.join(_JOIN_SECONDS)


def _accept_loop(
    listener: socket.socket,
    open_channel: OpenChannel,
    dest: tuple[str, int],
    state: _Tunnels,
    name: str,
) -> None:
    while not state.stopped:
        try:
            client, origin = listener.accept()
        except OSError:
            return  # the listener was shut down
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            channel = open_channel(dest, (origin[0], int(origin[1])))
        except TransportError as error:
            # The client sees the connection closed, as with a refused port.
            log.warning("%s: cannot forward to %s:%d: %s", name, dest[0], dest[1], error)
            client.close()
            continue
        pump = threading.Thread(target=_pump_and_close, args=(client, channel, state), daemon=True)
        if not state.add(pump, client, channel):
            _close(client, channel)
            return
        pump.start()


def _pump_and_close(client: socket.socket, channel: Channel, state: _Tunnels) -> None:
    try:
        pump(client, channel, stopped=lambda: state.stopped)
    finally:
        _close(client, channel)
        state.remove(threading.current_thread())


def pump(client: socket.socket, channel: Channel, *, stopped: Callable[[], bool]) -> None:
    """Copy bytes both ways until both directions reached end of file, an error, or stop."""
    readers: list[socket.socket | Channel] = [client, channel]
    while readers and not stopped():
        try:
            ready, _, _ = select.select(readers, [], [], _POLL_SECONDS)
            if client in ready:
                data = client.recv(_CHUNK)
                if data:
                    channel.sendall(data)
                else:
                    channel.shutdown_write()
                    readers.remove(client)
            if channel in ready:
                data = channel.recv(_CHUNK)
                if data:
                    client.sendall(data)
                else:
                    client.shutdown(socket.SHUT_WR)
                    readers.remove(channel)
        except (OSError, EOFError, ValueError):
            return  # one side went away (or was closed by stop()): end this tunnel
        except Exception:  # paramiko errors from a dropped SSH connection
            log.debug("tunnel ended", exc_info=True)
            return


def _close(client: socket.socket, channel: Channel) -> None:
    with contextlib.suppress(Exception):
        channel.close()
    with contextlib.suppress(OSError):
        client.close()
