"""What every part of the plan model shares: its strict base, durations, pins, host paths,
the engine names, an argument value."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
)

from orchestrator.names import check_name


class FieldError(ValueError):
    """A validation failure that belongs to part of the validated value: `at` is the path
    below it (e.g. `(2,)` for the third list item), so the loader can point at that part."""

    def __init__(self, message: str, *, at: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.at = at


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
MAX_DURATION = 30 * 24 * 3600.0  # 30 days: longer is a typo (or a hostile plan), not a wait


def parse_duration(value: Any) -> float:
    """'30m', '2s', '1h30m', '500ms' or a number of seconds -> seconds, at most 30 days."""
    return _at_most_30_days(_seconds(value), value)


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 5m or 1h")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):  # seconds, as a number is (`--timeout 5`)
            return float(text)
        if text and _DURATION_PART.sub("", text) == "":
            scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            return sum(float(n) * scale[u] for n, u in _DURATION_PART.findall(text))
    raise ValueError(f"expected a duration such as 30s, 5m or 1h, got {value!r}")


def _at_most_30_days(seconds: float, value: Any) -> float:
    if not math.isfinite(seconds) or seconds > MAX_DURATION:
        raise ValueError(f"a duration is at most 30 days (720h), got {value!r}")
    return seconds


# The JSON Schema accepts the written forms ("30m") as well as seconds.
Duration = Annotated[float, BeforeValidator(parse_duration, json_schema_input_type=float | str)]

# The engines a plan can launch, by the name its `service.engine` gives: each is the package
# of that name under engines/, which the registry (engines/__init__.py) builds on first use.
LAUNCHABLE: tuple[str, ...] = ("vllm", "sim", "sglang")

if TYPE_CHECKING:
    EngineName = str
else:  # the names as a Literal: validation, the schema and the docs read it
    EngineName = Literal[LAUNCHABLE]

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?==([A-Za-z0-9.+!_-]+)$")


def parse_pin(spec: str) -> tuple[str, str]:
    """'vllm==0.17.1' -> ('vllm', '0.17.1'). Only exact pins are reproducible."""
    match = _PIN.match(spec.strip())
    if not match:
        raise ValueError(
            f"{spec!r} is not an exact pin; write it as name==version (e.g. vllm==0.17.1)"
        )
    return match.group(1), match.group(3)


def canonical_name(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


# Plan values that become paths and names on a host are held to a conservative character
# set where they are loaded: pip writes a venv's path into `#!/bin/sh` wrappers, systemd and
# orch's state folders take the service name, and no value may climb out with `..`.
_PATH_CHARS = re.compile(r"[A-Za-z0-9._+@/-]+")
COMMAND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # not "..", not an option


_HOST_REF = re.compile(r"\$\{host\.[A-Za-z_][A-Za-z0-9_-]*\}")


SYSTEM_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
    "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib",
    "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/sbin", "/usr/share", "/var",
    "/var/lib", "/var/log"})


def host_path(value: str, *, host_refs: bool = False) -> str:
    """An absolute path on the host: letters, digits and `. _ + @ / -`, no `..`. With
    `host_refs`, `${host.X}` may stand in a part (checked again once filled in per host)."""
    if not value.startswith("/"):
        raise ValueError(f"expected an absolute path (~ is not expanded on the host), got {value!r}")
    if not _PATH_CHARS.fullmatch(_HOST_REF.sub("x", value) if host_refs else value):
        odd = "".join(sorted({c for c in value if not _PATH_CHARS.fullmatch(c)}))
        raise ValueError(
            f"{value!r} holds characters a host path must not ({odd!r}); use letters, digits "
            "and . _ + @ / -")
    if ".." in value.split("/"):
        raise ValueError(f"{value!r}: '..' is not allowed in a host path")
    return value


_DNS_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def host_address(value: str) -> str:
    """An IPv4 or IPv6 address (`0.0.0.0`, `::`) or a DNS host name (`localhost`,
    `gpu1.lab`): what a server can listen on, nothing else reaches its command line."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(value)
        return value
    labels = value.removesuffix(".").split(".")
    if (len(value) <= 253 and all(_DNS_LABEL.fullmatch(label) for label in labels)
            and not labels[-1].isdigit()):  # 1.2.3.4.5 is neither an address nor a name
        return value
    raise ValueError(f"expected an IP address (0.0.0.0, ::) or a host name (letters, digits, "
                     f"'-' and '.'), got {value!r}")


def service_name(value: str) -> str:
    """A server's or the router's name: it names a systemd unit and a folder."""
    return check_name(value, "a service name (it names a systemd unit and a folder)",
                      max_length=64)


ServiceName = Annotated[str, AfterValidator(service_name)]
HostAddress = Annotated[str, AfterValidator(host_address)]

V = TypeVar("V")


def flag_names(value: dict[str, V], allowed: str, example: str) -> dict[str, V]:
    """An engine's `args:` keys: long flag names without the dashes, each matching the
    pattern `allowed` (which starts with a letter or digit, so no key starts with `-`)."""
    for key in value:
        if not re.fullmatch(allowed, key):
            raise ValueError(f"flag {key!r}: write long flag names without dashes, e.g. {example}")
    return value


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, strict=True)


