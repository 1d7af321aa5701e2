"""A wall-clock deadline for one request of orch's synchronous HTTP client (httpx).

httpx's timeouts bound each read, not a request: a server that sends one byte of its header
block every half second is never timed out. `Deadline` bounds the whole request: when it
passes, a timer shuts the request's socket down (a blocked read returns at once, the
connection is dropped) and the request ends in `httpx.ReadTimeout`, whatever it was doing.
It learns the socket from httpcore's documented `trace` extension when the connection is
made, so the clients made by `client()` keep no connection between requests: each request
makes its own (the readiness polls, smoke checks and scrapes that use them are a few a
second at most). The benchmark's load generator has its own deadline (bench/client.py).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import httpx

_CONNECTED = ("connect_tcp.complete", "start_tls.complete")


@functools.cache
def tls() -> ssl.SSLContext:
    """The process's one TLS context for its httpx clients: each new client otherwise builds
    its own, reading the CA bundle (~23 ms of CPU), whether its URL is https or not; a sweep
    makes a client per level, a readiness wait several."""
    return httpx.create_ssl_context()


def client(timeout: float, headers: Mapping[str, str] | None = None) -> httpx.Client:
    """An httpx client for requests under a `Deadline`: no connection is kept alive, so
    every request's socket is one the deadline saw made."""
    return httpx.Client(timeout=timeout, headers=dict(headers or {}), verify=tls(),
                        limits=httpx.Limits(max_keepalive_connections=0))


class Deadline:
    """`with Deadline(s) as deadline: client.stream(..., extensions=deadline.extensions)`:
    the request is over `s` seconds after the `with` began (httpx.ReadTimeout)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    @property
    def extensions(self) -> dict[str, Any]:
        return {"trace": self._trace}

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._timer.cancel()
        if self.expired and (error is None or isinstance(error, Exception)):
            # whatever the cut socket made of the answer (a closed connection, a body cut
            # short that looks whole), it is a request that did not end in time
            raise httpx.ReadTimeout(f"no complete answer within {self.seconds:g} s") from error

    def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        if not event.endswith(_CONNECTED):
            return
        stream = info.get("return_value")
        found = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(found, socket.socket):
            with self._lock:
                self._sockets.append(found)
                if self.expired:  # connected after the deadline passed
                    _shut(found)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for found in self._sockets:
                _shut(found)


def _shut(found: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed already: the request ended as it passed
        found.shutdown(socket.SHUT_RDWR)
