"""`connect(name, inventory)`: the transport for one inventory host, connected.

Local hosts get `LocalTransport`; every other host gets the transport `ssh.transport` names
or, with `auto` (the default), the one `choice.py` picks for it: `OpensshTransport` (the
`ssh` client, one master connection per host) where the `ssh` client can, `SshTransport`
(fabric and paramiko) elsewhere. Each is imported only when a host needs it (paramiko costs
~0.2 s of start-up that a local run does not pay), and the `ssh` client is looked up only
when an SSH host is connected with `auto`. The runner calls this once per host, from that
host's worker thread, and reuses the transport for the whole run; `transport.choice` says
which transport it is and why (--debug prints it, facts.json keeps it).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from orchestrator.errors import InventoryError
from orchestrator.inventory import Inventory
from orchestrator.local_files import kind_of, not_a_file
from orchestrator.transport.base import Transport
from orchestrator.transport.choice import (
    LOCAL,
    TransportChoice,
    choose,
    config_proxy,
    find_ssh_client,
)
from orchestrator.transport.target import SshTarget, host_spec, identity_path, resolve_target

if TYPE_CHECKING:  # tenacity is imported only with the SSH transport
    from orchestrator.transport.retry import Backoff, RetryCallback

log = logging.getLogger("orchestrator.transport")


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

        local = LocalTransport(name)
        local.choice = LOCAL
        log.debug("%s: transport %s", name, LOCAL)
        return local

    target = resolve_target(name, inventory)
    choice = ssh_choice(target, inventory)
    log.debug("%s: transport %s", name, choice)
    transport: Transport
    if choice.name == "openssh":
        # only the transport asked for (start-up time)
        from orchestrator.transport.openssh import OpensshTransport

        transport = OpensshTransport(name, target, inventory.ssh,
                                     on_retry=on_retry, backoff=backoff)
        _refused_as_by_paramiko(target, inventory)  # ssh: a missing key, a user, a FIFO
    else:
        # only the transport asked for (start-up time)
        from orchestrator.transport.ssh import SshTransport

        transport = SshTransport(name, target, inventory.ssh,
                                 on_retry=on_retry, backoff=backoff)
    transport.choice = choice
    try:
        transport.open()
    except BaseException:
        transport.close()
        raise
    return transport


def ssh_choice(target: SshTarget, inventory: Inventory) -> TransportChoice:
    """The transport of an SSH host (the `ssh` client and its config are asked only for
    `auto`, the config only when the rest already says openssh)."""
    # an SSH host: these are no longer start-up
    from orchestrator.transport.openssh import CONTROL_FOLDER
    from orchestrator.transport.openssh_args import client_argv
    from orchestrator.transport.ssh_config import known_hosts_path, named_config

    settings = inventory.ssh
    client = find_ssh_client() if settings.transport == "auto" else None
    folder = os.path.expanduser(CONTROL_FOLDER)
    known = known_hosts_path(settings)
    choice = choose(settings.transport, target, known, client, folder)
    if settings.transport != "auto" or choice.name != "openssh" or client is None \
            or settings.config is False:
        return choice
    named = named_config(settings)
    files = [named] if named is not None else [os.path.expanduser(settings.config),
                                               "/etc/ssh/ssh_config"]
    proxy = config_proxy(client, client_argv(target, settings, folder)[0], files)
    return choose(settings.transport, target, known, client, folder, proxy)


def _refused_as_by_paramiko(target: SshTarget, inventory: Inventory) -> None:
    """What paramiko refuses before connecting is refused alike for the `ssh` client: an
    identity_file that is not a file (ssh would warn and try other keys), a user given both
    in `address` and in `user` (ssh would take one of them), a known_hosts that is there
    but not a regular file (ssh would wait forever on a FIFO)."""
    from orchestrator.transport.ssh_config import known_hosts_path

    known = known_hosts_path(inventory.ssh)
    if known is not None and os.path.exists(known) and not_a_file(known) is not None:
        kind = kind_of(os.stat(known).st_mode)  # a missing file is an empty one, as for ssh
        raise InventoryError(f"cannot read known_hosts file {known}: not a regular file ({kind})")
    for hop in target.hops():
        if hop.user is not None and "@" in hop.host:
            raise InventoryError(
                f"host {hop.name!r}: cannot build its SSH connection: the user is given both "
                "in `address` and in `user`",
                hint="give `address` as a bare host name or IP, with `user` and `port` apart")
        if hop.identity_file is not None:
            identity_path(hop)
