"""The `ssh` command line of the OpenSSH transport, built from an inventory host (pure).

Every inventory value goes into its own argv element (`-p`, `-l`, the destination after
`--`), never through a shell; the few that ssh parses as config text (`-o KEY=VALUE`:
IdentityFile, UserKnownHostsFile)
are double-quoted with `%` doubled, so a path with spaces, quotes or `%` stays one path and
no ssh token expands in it. A jump becomes a ProxyCommand that runs this same builder's
`ssh -W` for the jump host (its own port, user, key, known_hosts), each word quoted with
`shlex.quote`, so jump chains keep their per-hop settings as with paramiko.
"""

from __future__ import annotations

import hashlib
import math
import os
import shlex

from orchestrator.errors import InventoryError
from orchestrator.inventory import SshSettings
from orchestrator.transport.ssh_config import KEEPALIVE_SECONDS, known_hosts_path, named_config
from orchestrator.transport.target import SshTarget

_SOCKET_PATH_MAX = 90  # sun_path is 108 bytes; ssh appends ".XXXXXXXXXXXXXXXX" while binding


def checked(value: str, what: str) -> str:
    """An inventory value refused when it cannot be passed to ssh unambiguously."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InventoryError(f"{what} {value!r} holds a control character",
                             hint="ssh cannot be given it as one value")
    return value


def config_value(value: str, what: str) -> str:
    """`value` as ssh's config parser reads one argument: quoted, `%` tokens disabled."""
    escaped = checked(value, what).replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def hop_options(hop: SshTarget, settings: SshSettings) -> list[str]:
    """The options that reach one hop: what the paramiko transport sets, in ssh's words."""
    options = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={math.ceil(hop.connect_timeout)}",
               "-o", f"ServerAliveInterval={KEEPALIVE_SECONDS}", "-o", "LogLevel=ERROR"]
    config = named_config(settings)
    if settings.config is False:
        options += ["-F", "/dev/null"]
    elif config is not None:
        options += ["-F", config]
    known = known_hosts_path(settings)
    if known is None:  # `known_hosts: false`: any key, remembered nowhere
        options += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    else:
        options += ["-o", "StrictHostKeyChecking=yes",
                    "-o", f"UserKnownHostsFile={config_value(known, 'ssh.known_hosts')}"]
    if hop.port is not None:
        options += ["-p", str(hop.port)]
    if hop.user is not None:
        options += ["-l", checked(hop.user, f"{hop.name}: user")]
    if hop.identity_file is not None:
        key = os.path.expanduser(checked(hop.identity_file, f"{hop.name}: identity_file"))
        options += ["-o", f"IdentityFile={config_value(key, f'{hop.name}: identity_file')}"]
    if hop.jump is not None:
        jump = ["ssh", *hop_options(hop.jump, settings), "-W", "%h:%p", "--",
                destination(hop.jump)]
        words = [w if w == "%h:%p" else shlex.quote(w.replace("%", "%%")) for w in jump]
        options += ["-o", "ProxyCommand=" + " ".join(words)]
    return options


def destination(hop: SshTarget) -> str:
    if hop.host.startswith("-"):
        raise InventoryError(f"{hop.name}: address {hop.host!r} starts with '-'",
                             hint="an address or host name never starts with '-'")
    return checked(hop.host, f"{hop.name}: address")


def control_path(options: list[str], folder: str) -> str | None:
    """The master connection's socket for these options (one per distinct way to reach a
    host), or None when `folder` is too deep for a socket path."""
    digest = hashlib.sha256("\0".join(options).encode()).hexdigest()[:20]
    path = os.path.join(folder, digest)
    return path if len(path.encode()) <= _SOCKET_PATH_MAX else None


def client_argv(target: SshTarget, settings: SshSettings,
                folder: str) -> tuple[list[str], str | None]:
    """`ssh OPTIONS -- HOST` (append the remote command, or use with `-W`) and the master
    connection's socket (None: no master, every command connects)."""
    options = hop_options(target, settings)
    path = control_path([*options, target.host], folder)
    if path is not None:
        options += ["-o", "ControlMaster=auto", "-o", f"ControlPath={config_value(path, 'ssh')}",
                    "-o", f"ControlPersist={math.ceil(settings.control_persist)}"]
    return ["ssh", *options, "--", destination(target)], path
