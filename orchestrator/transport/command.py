"""Shell commands built from parts: quoted by construction, masked when printed.

`str(command)` is what logs and errors show (secrets as `***`); only a transport calls
`command.raw()` to get the text it sends to the host.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator import masking


@dataclass(frozen=True)
class Secret:
    """A secret argument: quoted like any other part, shown as `***`."""

    value: str

    def __str__(self) -> str:
        return masking.MASK


@dataclass(frozen=True)
class Raw:
    """A trusted shell fragment inserted verbatim (operators such as `&&`, `|`, `>`)."""

    text: str


Part = str | Secret | Raw


def quoted(value: str) -> str:
    """One value as one shell word, for the few scripts orch writes as text (the one place
    a value is quoted: `Command` parts go through it too)."""
    return shlex.quote(value)


class Command:
    """A shell command line made of quoted parts."""

    def __init__(self, *parts: Part | Iterable[Part]) -> None:
        flat: list[Part] = []
        for part in parts:
            if isinstance(part, str | Secret | Raw):
                flat.append(part)
            else:
                flat.extend(part)
        self.parts: tuple[Part, ...] = tuple(flat)

    @classmethod
    def script(cls, text: str) -> Command:
        """A trusted shell script (written by orch, not by a user)."""
        return cls(Raw(text))

    def __add__(self, other: Command) -> Command:
        return Command(self.parts, other.parts)

    def then(self, other: Command) -> Command:
        return Command(self.parts, Raw("&&"), other.parts)

    def _render(self, reveal: bool) -> str:
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, Raw):
                out.append(part.text)
            elif isinstance(part, Secret):
                out.append(quoted(part.value) if reveal else masking.MASK)
            else:
                out.append(quoted(part))
        return " ".join(out)

    def raw(self) -> str:
        """The real command text. Only transports may call this."""
        return self._render(reveal=True)

    def __str__(self) -> str:
        return masking.mask(self._render(reveal=False))

    def __repr__(self) -> str:
        return f"Command({self!s})"


def quote_env_value(value: str) -> str:
    """`value` in double quotes, escaped for systemd EnvironmentFile= and POSIX sh alike
    (the service's environment file, a command's environment on stdin)."""
    escaped = re.sub(r'([\\"$`])', r"\\\1", value)
    return f'"{escaped}"'


def atomic_write_command(path: str, mode: int) -> Command:
    """The one-round-trip atomic write used by `put` (stdin carries the data)."""
    directory = posixpath.dirname(path) or "."
    temp = f"{path}.orch-{secrets.token_hex(4)}.tmp"
    # mv -T: a directory at `path` is an error, not a place to drop the file into.
    return Command(
        Raw("mkdir -p"), directory, Raw("&& umask 077 && cat >"), temp,
        Raw(f"&& chmod {mode:o}"), temp, Raw("&& mv -fT"), temp, path,
        Raw("|| { status=$?; rm -f"), temp, Raw("; exit $status; }"),
    )  # fmt: skip
