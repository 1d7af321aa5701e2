"""What `orch init` writes from: an `InitSpec` (one host, one model, simulator or vLLM), and the
checks of each value a flag or an answer gives it.

Every value from the command line is hostile (it reaches a shell on the host): each is checked
here before it becomes part of a spec, and a bad one is a `BadValue` naming the InitSpec
attribute it was for (`FLAGS` gives the flag to blame).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VLLM_VERSION = "0.17.1"  # the version the shipped plans pin
LOCAL = "localhost"  # --host localhost: this machine, no SSH
SIM_MODEL = "nvidia/Kimi-K2.5-NVFP4"  # what the simulator's default profile measured
SIM_GPUS = 8  # that profile's tensor parallel size (documents.py: SIM_PROFILE)

# The flag (or NAME) each InitSpec attribute comes from, for messages.
FLAGS: dict[str, str] = {
    "name": "NAME", "host": "--host", "user": "--user", "port": "--port",
    "identity_file": "--identity-file", "jump": "--jump", "model": "--model",
    "served_model_name": "--served-model-name", "tensor_parallel_size": "--tensor-parallel-size",
    "vllm_version": "--vllm-version",
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a plan name (Plan.name), a file name
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\$?")
_TARGET = re.compile(r"(?:(?P<user>[^@]*)@)?(?P<address>\[[^\]]*\]|[^:@\[\]]*)(?::(?P<port>[^:]*))?")


class BadValue(ValueError):
    """A flag's (or an answer's) value that cannot make a plan; `attr` names the InitSpec
    attribute (FLAGS gives its flag)."""

    def __init__(self, attr: str, message: str) -> None:
        super().__init__(message)
        self.attr = attr
        self.message = message


@dataclass(frozen=True)
class HostArg:
    """A parsed `--host`: `address` None means this machine (connection: local)."""

    address: str | None
    user: str | None = None
    port: int | None = None


@dataclass(frozen=True)
class InitSpec:
    name: str
    target: HostArg
    model: str
    tensor_parallel_size: int = 1
    sim: bool = False
    vllm_version: str = VLLM_VERSION
    served_model_name: str | None = None
    identity_file: str | None = None
    jump: str | None = None

    def __post_init__(self) -> None:
        plan_name(self.name)  # it lands in file names and comments: checked whoever builds this

    @property
    def local(self) -> bool:
        return self.target.address is None

    @property
    def host(self) -> str:
        """The host's name in the inventory (and the plan's `hosts:`)."""
        return host_name(self.target)


def text_value(attr: str, value: str) -> str:
    """One printable line without `${`: a line break would end a YAML line or a shell command,
    and orch reads `${...}` in a plan as a variable or a secret, not as text."""
    if not value.strip():
        raise BadValue(attr, "expected a value, got an empty one")
    odd = sorted({c for c in value if not c.isprintable()})
    if odd:
        shown = ", ".join(repr(c) for c in odd)
        raise BadValue(attr, f"{value!r} holds a line break or control character ({shown}); "
                             "expected one line of printable text")
    if "${" in value:
        raise BadValue(attr, f"{value!r} holds '${{', which orch would read as a reference "
                             "(${vars.NAME} or ${env:NAME}), not as text")
    return value


def model_name(attr: str, value: str) -> str:
    """A model id, path or served name: `vllm serve` would read a leading `-` as a flag."""
    text_value(attr, value)
    if value.startswith("-"):
        raise BadValue(attr, f"{value!r} starts with '-', which `vllm serve` would read as a flag")
    return value


def plan_name(value: str) -> str:
    """NAME names `plans/NAME.yaml` and `runs/NAME/`: checked before any path is built."""
    if not _NAME.fullmatch(value):
        raise BadValue("name", f"expected up to 100 letters, digits, '.', '_' or '-' (it names "
                               f"plans/NAME.yaml), got {value!r}")
    return value


def default_name(model: str, sim: bool) -> str:
    """`Qwen/Qwen3-8B` -> `qwen3-8b` (`sim-qwen3-8b` on the simulator, as plans/sim/ names)."""
    last = model.rstrip("/").rsplit("/", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", last)[:64].strip("-._").lower() or "my-model"
    return f"sim-{slug}" if sim else slug


def parse_host_arg(text: str, attr: str = "host", *, allow_local: bool = True) -> HostArg:
    """`localhost` (this machine), or `[user@]address[:port]` (IPv6 in brackets)."""
    text = text_value(attr, text).strip()
    if allow_local and text.lower() == LOCAL:
        return HostArg(None)
    match = _TARGET.fullmatch(text)
    if match is None:
        raise BadValue(attr, f"expected an address, user@address or user@address:port "
                             f"(an IPv6 address in brackets, [fe80::1]:22), got {text!r}")
    user, address, port = match.group("user"), match.group("address"), match.group("port")
    if address.startswith("["):
        address = address[1:-1]
        if not _IPV6.fullmatch(address):
            raise BadValue(attr, f"{address!r} is not an IPv6 address")
    elif not _HOST_NAME.fullmatch(address):
        raise BadValue(attr, f"{address!r} is not a host name or address (letters, digits, "
                             "'.', '-' and '_'; an IPv6 address in brackets)")
    if user is not None:
        user_name(user, attr)
    number = None
    if port is not None:
        if not port.isdigit():
            raise BadValue(attr, f"the port {port!r} is not a number")
        number = int(port)
        if not 1 <= number <= 65535:  # the inventory would refuse it too, after every question
            raise BadValue(attr, f"the port {number} is not between 1 and 65535")
    return HostArg(address, user, number)


def user_name(value: str, attr: str = "user") -> str:
    if not _USER.fullmatch(value):
        raise BadValue(attr, f"expected a user name (letters, digits, '.', '_', '-'), got {value!r}")
    return value


def host_name(target: HostArg) -> str:
    """The inventory name of a host: its address, kept to characters safe in a file name
    (run folders have one folder per host)."""
    if target.address is None:
        return LOCAL
    return re.sub(r"[^A-Za-z0-9._-]+", "-", target.address).strip("-.").lower() or "gpu"


def gpu_count(text: str) -> int:
    """A number of GPUs (`--tensor-parallel-size`, or the answer to its question)."""
    try:
        value = int(text)
    except ValueError:
        raise BadValue("tensor_parallel_size", f"expected a number of GPUs, got {text!r}") from None
    if value < 1:
        raise BadValue("tensor_parallel_size", f"expected at least 1 GPU, got {value}")
    return value
