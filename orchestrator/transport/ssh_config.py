"""What both SSH transports read from the inventory's `ssh:` settings the same way: the
known_hosts file, and the rule for an ssh config file the inventory names."""

from __future__ import annotations

import os
import re
from pathlib import Path

from orchestrator import local_files
from orchestrator.errors import InventoryError
from orchestrator.inventory import SshSettings
from orchestrator.plan.source import MAX_FILE_BYTES

DEFAULT_SSH_CONFIG = SshSettings.model_fields["config"].default
KEEPALIVE_SECONDS = 30  # notices a dead peer during long quiet waits (service start-up)

# Options that make ssh run a command on the controller, or read another file that could.
_RUNS_COMMANDS = re.compile(
    r"\s*(proxycommand|localcommand|permitlocalcommand|knownhostscommand|include"
    r"|match\b.*\bexec)\b", re.IGNORECASE)


def refuse_commands(path: str, named: str) -> None:
    """A config file the inventory names is part of the repository, as
    `ansible_ssh_common_args` are, and gets their rule: nothing in it may run a command on
    the controller (the user's own ~/.ssh/config is theirs, honoured as ssh does)."""
    try:
        text = local_files.read_text(Path(path), max_bytes=MAX_FILE_BYTES, errors="replace")
    except OSError as error:
        raise InventoryError(f"cannot read ssh.config {named}: {error.strerror or error}") from None
    for number, line in enumerate(text.splitlines(), 1):
        found = _RUNS_COMMANDS.match(line)
        if found:
            raise InventoryError(
                f"{named}:{number}: {found.group(1)} in an ssh config named by the inventory "
                "would run a command on this machine",
                hint="use the inventory's `jump:` (ProxyJump, which orch opens itself), or put "
                     "the option in your own ~/.ssh/config")


def named_config(settings: SshSettings) -> str | None:
    """The ssh config file the inventory names (checked), or None for the user's own
    (`~/.ssh/config`, read as ssh reads it) or none at all (`config: false`)."""
    if settings.config is False or settings.config == DEFAULT_SSH_CONFIG:
        return None
    path = os.path.expanduser(settings.config)
    why = local_files.not_a_file(path)  # a FIFO would hold ssh's read forever
    if why is not None:
        raise InventoryError(
            f"ssh.config names {settings.config!r}, which {why}",
            hint="fix the path, or set `ssh: {config: false}` to ignore ssh config files",
        )
    refuse_commands(path, settings.config)
    return path


def known_hosts_path(settings: SshSettings) -> str | None:
    if settings.known_hosts is False:
        return None
    return os.path.expanduser(settings.known_hosts)
