"""`connect(name, inventory)`: the transport for one inventory host, connected.

Local hosts get `LocalTransport`; every other host gets `SshTransport` (fabric and
paramiko, imported only then: they cost ~0.2 s of start-up that a local run does not need),
or `OpensshTransport` with `ssh: {transport: openssh}` (the `ssh` client, no paramiko).
The runner calls this once per host, from that host's worker thread, and reuses the
transport for the whole run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.inventory import Inventory
from orchestrator.transport.base import Transport
from orchestrator.transport.target import host_spec, resolve_target

if TYPE_CHECKING:  # tenacity is imported only with the SSH transport
    from orchestrator.transport.retry import Backoff, RetryCallback


def connect(
    name: str,
    inventory: Inventory,
    *,
    on_retry: RetryCallback | None = None,
    backoff: Backoff | None = None,
) -> Transport:
    """A connected transport to inventory host `name`.

    Raises InventoryError for an unknown host or a bad jump chain, ConnectError after the
    retries of a transient failure are spent, AuthError and HostKeyError at once.
    `on_retry(host, attempt, error)` is called before each retry; `backoff` sets the waits
    (default 0.2 s doubling to 5 s, `ssh.connect_retries` retries).
    """
    spec = host_spec(name, inventory)
    if spec.connection == "local":
        # only the transport asked for (paramiko is slow to import: start-up time)
        from orchestrator.transport.local import LocalTransport

        return LocalTransport(name)

    transport: Transport
    if inventory.ssh.transport == "openssh":
        # only the transport asked for (start-up time)
        from orchestrator.transport.openssh import OpensshTransport

        transport = OpensshTransport(name, resolve_target(name, inventory), inventory.ssh,
                                     on_retry=on_retry, backoff=backoff)
    else:
        # only the transport asked for (start-up time)
        from orchestrator.transport.ssh import SshTransport

        transport = SshTransport(name, resolve_target(name, inventory), inventory.ssh,
                                 on_retry=on_retry, backoff=backoff)
    try:
        transport.open()
    except BaseException:
        transport.close()
        raise
    return transport
