"""Which SSH client reaches a host: `ssh.transport: auto` (the default), `openssh` or
`paramiko`.

auto takes the OpenSSH client (transport/openssh.py: one master connection per host,
shared by every command and kept for the next run) wherever it can do what orch needs, and
paramiko (transport/ssh.py) elsewhere:
- no `ssh` on the PATH, or an `ssh` that is not OpenSSH (Dropbear's, a wrapper), or one
  without connection sharing (OpenSSH before 5.6 has no ControlPersist; the Windows port
  has no ControlMaster);
- a socket folder so deep that the master's socket path does not fit in a Unix socket
  address: without a master every command would pay a handshake, slower than paramiko's
  one connection;
- a host reached through a `jump:`, or a ProxyJump or ProxyCommand of the ssh config: ssh
  runs the jump as a ProxyCommand, and with a master connection (ControlPersist) it sends
  that command's stderr to /dev/null, so a jump host's unknown key or refused login would
  read "Connection closed" and be retried, where paramiko names the jump host and what to
  fix (`ssh.transport: openssh` still takes it). The config is asked (`ssh -G`, per host)
  only when its files mention a proxy at all;
- a host whose inventory values ssh cannot be given as one value (a control character in
  its user, identity_file or address, or in `ssh.known_hosts`); paramiko takes them as
  they are.
Authentication needs no rule: neither client types a password or a key's passphrase (both
take an encrypted key from the ssh-agent only, and fail the same way without one).

`choose` is the rule (pure); `find_ssh_client` and `config_proxy` are its inputs from the
machine, looked up only when an SSH host is connected with `auto` (the client once per
process).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Literal

from orchestrator.errors import InventoryError
from orchestrator.transport.target import SshTarget

TransportName = Literal["local", "paramiko", "openssh"]
_OPENSSH = re.compile(r"^OpenSSH_(?P<windows>for_Windows_)?(?P<major>\d+)\.(?P<minor>\d+)")
_CONTROL_PERSIST_SINCE = (5, 6)
_VERSION_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class SshClient:
    """The `ssh` binary the PATH gives, and the first line `ssh -V` printed ("" when it
    could not be run)."""

    path: str
    version: str


@dataclass(frozen=True)
class TransportChoice:
    """The transport a host gets, and why (shown with --debug, kept in facts.json)."""

    name: TransportName
    why: str

    def __str__(self) -> str:
        return f"{self.name} ({self.why})"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "why": self.why}


LOCAL = TransportChoice("local", "connection: local")


def choose(setting: str, target: SshTarget, known_hosts: str | None,
           client: SshClient | None, socket_folder: str,
           config_proxy: str | None = None) -> TransportChoice:
    """The transport of an SSH host: `setting` is the inventory's `ssh.transport`, `target`
    the host's hop chain, `known_hosts` the file `ssh.known_hosts` names (None: unchecked),
    `client` the `ssh` found on the PATH (None: none; not needed unless `setting` is auto),
    `socket_folder` where the master connections' sockets go, `config_proxy` the option
    (ProxyJump, ProxyCommand) by which the ssh config sends the host through another."""
    from orchestrator.transport.openssh_args import control_path  # SSH hosts only: start-up

    if setting in ("openssh", "paramiko"):
        return TransportChoice("openssh" if setting == "openssh" else "paramiko",
                               f"ssh.transport: {setting}")
    if client is None:
        return TransportChoice("paramiko", "auto: no ssh client on the PATH")
    unusable = _client_unusable(client)
    if unusable is not None:
        return TransportChoice("paramiko", f"auto: {unusable}")
    if target.jump is not None:
        return TransportChoice("paramiko", f"auto: reached through the jump host "
                                           f"{target.jump.name}, whose own errors ssh hides")
    if config_proxy is not None:
        return TransportChoice("paramiko", f"auto: the ssh config gives it a {config_proxy}, "
                                           "whose own errors ssh hides")
    refused = _values_refused(target, known_hosts)
    if refused is not None:
        return TransportChoice("paramiko", f"auto: {refused}")
    if control_path([], socket_folder) is None:
        return TransportChoice("paramiko", f"auto: a socket path under {socket_folder} is too "
                                           "long for ssh's master connection")
    return TransportChoice("openssh", f"auto: ssh client found at {client.path}")


def _client_unusable(client: SshClient) -> str | None:
    """Why this `ssh` cannot keep a master connection per host, or None when it can."""
    found = _OPENSSH.match(client.version)
    if found is None:
        said = f" (it says {client.version!r})" if client.version else ""
        return f"{client.path} is not an OpenSSH client{said}"
    if found["windows"]:
        return f"{client.path} is OpenSSH for Windows, which has no ControlMaster"
    if (int(found["major"]), int(found["minor"])) < _CONTROL_PERSIST_SINCE:
        word = client.version.split(",")[0].split()[0]
        return f"{client.path} is {word}, older than ControlPersist (5.6)"
    return None


def _values_refused(target: SshTarget, known_hosts: str | None) -> str | None:
    """The first inventory value of the chain ssh cannot be given as one value (named by
    its field, never shown), or None."""
    from orchestrator.transport.openssh_args import checked  # SSH hosts only: start-up

    values: list[tuple[str | None, str]] = [(known_hosts, "ssh.known_hosts")]
    for hop in target.hops():
        values += [(hop.host, f"{hop.name}'s address"), (hop.user, f"{hop.name}'s user"),
                   (hop.identity_file, f"{hop.name}'s identity_file")]
    for value, what in values:
        if value is None:
            continue
        try:
            checked(value, what)
        except InventoryError:
            return f"{what} holds a control character, which ssh cannot be given"
    return None


_found: list[SshClient | None] = []  # the lookup, once per process
_finding = threading.Lock()  # the hosts of a run connect from their own threads


def find_ssh_client() -> SshClient | None:
    """The `ssh` on this process's PATH and its version line, looked up on the first call."""
    with _finding:
        if not _found:
            _found.append(_look_up())
        return _found[0]


def forget_ssh_client() -> None:
    """Look the client up again on the next call (for a changed PATH)."""
    with _finding:
        _found.clear()


def _look_up() -> SshClient | None:
    import shutil
    import subprocess

    path = shutil.which("ssh")
    if path is None:
        return None
    try:
        done = subprocess.run([path, "-V"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=_VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return SshClient(path, "")
    said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
    return SshClient(path, said[0] if said else "")


_PROXY_WORD = re.compile(r"^\s*(?:proxyjump|proxycommand)\b", re.I | re.M)
_INCLUDE = re.compile(r"^\s*include\s*=?\s*(.+)$", re.I | re.M)
_PROXY_SAID = re.compile(r"^(proxyjump|proxycommand) (.+)$", re.M)
_PROXY_NAMES = {"proxyjump": "ProxyJump", "proxycommand": "ProxyCommand"}
_INCLUDE_DEPTH = 8  # ssh's own limit is 16; a loop stops here


def config_proxy(client: SshClient, argv: list[str], files: list[str]) -> str | None:
    """The ProxyJump or ProxyCommand the ssh config gives the host `argv` (`ssh OPTIONS --
    HOST`) reaches, or None. ssh's own answer (`ssh -G`, a few ms) is asked only when one
    of the config `files` ssh reads (with those they Include) names a proxy at all."""
    if not any(_mentions_proxy(path, 0) for path in files):
        return None
    import subprocess

    try:
        done = subprocess.run([client.path, "-G", *argv[1:]], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=_VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None  # ssh will say what is wrong when it connects
    for found in _PROXY_SAID.finditer(done.stdout.decode(errors="replace")):
        if found[2].strip() != "none":
            return _PROXY_NAMES[found[1]]
    return None


def _mentions_proxy(path: str, depth: int) -> bool:
    """Whether the config file, or one it includes, has a ProxyJump or ProxyCommand line."""
    import glob
    import os

    text = _text(path)
    if _PROXY_WORD.search(text):
        return True
    if depth >= _INCLUDE_DEPTH:
        return True  # too deep to tell: ask ssh
    base = os.path.dirname(path)  # ~/.ssh for the user's file, /etc/ssh for the system's
    return any(_mentions_proxy(included, depth + 1)
               for line in _INCLUDE.findall(text) for pattern in line.split()
               for included in sorted(glob.glob(os.path.join(base, os.path.expanduser(
                   pattern.strip('"'))))))


def _text(path: str) -> str:
    from pathlib import Path

    from orchestrator import local_files
    from orchestrator.plan.source import MAX_FILE_BYTES

    try:
        return local_files.read_text(Path(path), max_bytes=MAX_FILE_BYTES, errors="replace")
    except OSError:  # none, or unreadable: ssh reads nothing from it either
        return ""
