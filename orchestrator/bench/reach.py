"""How the benchmark reaches the service: straight to `host:port`, or through an SSH local
port forward when the service port is not exposed (`bench.via: ssh`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

from orchestrator.errors import BenchError
from orchestrator.transport.base import Transport


@contextlib.contextmanager
def bench_url(
    address: str,
    port: int,
    *,
    via: Literal["direct", "ssh"] = "direct",
    transport: Transport | None = None,
    scheme: Literal["http", "https"] = "http",
) -> Iterator[str]:
    """The server root URL to benchmark, valid inside the `with` block.

    `address` is how the controller reaches the host directly; with `via="ssh"` the service
    is reached as 127.0.0.1:`port` seen from the host, through `transport.forward`.
    """
    if via == "direct":
        host = f"[{address}]" if ":" in address and not address.startswith("[") else address
        yield f"{scheme}://{host}:{port}"
        return
    if transport is None:
        raise BenchError("bench.via is ssh, but there is no connection to the host to forward through")
    with transport.forward(port) as local_port:
        yield f"{scheme}://127.0.0.1:{local_port}"
