"""What `orch init` writes: a starting plan and inventory for one host, as commented YAML.

Pure: an `InitSpec` in, text out; the command (`orchestrator/commands/init.py`) asks,
validates with orch's own loaders and writes. Every value from the command line is hostile
(it reaches a shell on the host), so none is ever formatted into YAML text: the documents are
built as data, each scalar goes through the YAML serializer, comments are constant text, and
`to_yaml` checks that the text parses back to exactly the data it was made from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

VLLM_VERSION = "0.17.1"  # the version the shipped plans pin
LOCAL = "localhost"  # --host localhost: this machine, no SSH
SIM_MODEL = "nvidia/Kimi-K2.5-NVFP4"  # what the simulator's default profile measured
SIM_PROFILE = "kimi-k2.5-nvfp4-8x-rtx-pro-6000"
SIM_GPUS = 8  # that profile's tensor parallel size
SERVICE_PORT = 8000

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


# --- the documents, as data -------------------------------------------------------------

_SMOKE: list[dict[str, Any]] = [
    {
        "name": "answer",
        "prompt": "Why is the sky blue? Answer in two or three sentences.",
        "max_tokens": 1024,
        "expect": {"content_regex": "(?i)scatter"},
    },
    {
        "name": "code",
        "prompt": "Write a Python function named add(a, b) that returns the sum of a and b. "
                  "Answer with one ```python code block.",
        "max_tokens": 2048,
        "expect": {"python_function": {"name": "add", "calls": [
            {"args": [2, 3], "returns": 5}, {"args": [-4, 4], "returns": 0}]}},
    },
]

_BENCH_PROMPT = ("Write a detailed step-by-step guide to planting, growing and harvesting a "
                 "vegetable garden, from preparing the soil to storing the harvest.")


def plan_data(spec: InitSpec) -> dict[str, Any]:
    """The plan `orch init` writes, as data (`render_plan` adds the comments)."""
    version = "${vars.vllm_version}"
    if spec.sim:
        python = {"venv": f"${{controller.home}}/.cache/orch/sim/venv-{version}",
                  "interpreter": "python3", "installer": "pip"}
        install: dict[str, Any] = {"packages": []}
        what = "the orch simulator"
    else:
        python = {"venv": f"/opt/venvs/vllm-{version}", "interpreter": "python3.12",
                  "installer": "uv"}
        install = {"packages": [f"vllm=={version}"], "clean": True, "torch_backend": "auto"}
        what = f"vLLM {spec.vllm_version}"
    data: dict[str, Any] = {
        "name": spec.name,
        "description": f"{spec.model} on {spec.host} ({what}, TP{spec.tensor_parallel_size})",
        "hosts": spec.host,
        "vars": {"vllm_version": spec.vllm_version},
        "python": python,
        "install": install,
    }
    if not spec.sim:
        data["env"] = None  # only comments: the HF_TOKEN line to uncomment
    service: dict[str, Any] = {"engine": "sim" if spec.sim else "vllm", "model": spec.model}
    if spec.served_model_name is not None:
        service["served_model_name"] = spec.served_model_name
    if spec.sim:
        service["backend"] = "process"
        if spec.local:
            service["host"] = "127.0.0.1"
    service["port"] = SERVICE_PORT
    service["args"] = {"tensor-parallel-size": spec.tensor_parallel_size}
    if spec.sim:
        service["sim"] = {"profile": SIM_PROFILE, "time_scale": 0.1, "startup_time_scale": 0.03,
                          "vllm_version": version}
    data["service"] = service
    data["health"] = ({"startup_timeout": "5m", "poll_interval": "0.5s"} if spec.sim else
                      {"startup_timeout": "30m", "poll_interval": "5s", "request_timeout": "60s"})
    data["smoke"] = [dict(check) for check in _SMOKE]
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256] if spec.sim else [1, 2, 4, 8, 16, 32, 48, 64, 96, 128]
    data["bench"] = {"endpoint": "chat", "prompt": _BENCH_PROMPT, "max_tokens": 1024,
                     "mode": "batch", "concurrency": levels, "requests_per_level": "1x",
                     "warmup": 1}
    if not spec.sim:
        data["collect"] = [{"path": "/etc/os-release"}, {"path": "/proc/driver/nvidia/version"}]
    return data


def inventory_data(spec: InitSpec) -> dict[str, Any]:
    target = spec.target
    if target.address is None:
        return {"hosts": {spec.host: {"connection": "local"}}}
    host: dict[str, Any] = {"address": target.address}
    if target.port is not None:
        host["port"] = target.port
    if target.user is not None:
        host["user"] = target.user
    if spec.identity_file is not None:
        host["identity_file"] = spec.identity_file
    if spec.jump is not None:
        host["jump"] = spec.jump
    host["vars"] = {"gpus": spec.tensor_parallel_size}
    return {"hosts": {spec.host: host},
            "ssh": {"known_hosts": "~/.ssh/known_hosts", "config": "~/.ssh/config"}}


# --- the comments ---------------------------------------------------------------------------

@dataclass
class Notes:
    """Comments by dotted path (`service.args`, `smoke.0`): lines above a key, at the end of
    its line, and below it (indented as its children)."""

    above: dict[str, list[str]] = field(default_factory=dict)
    inline: dict[str, str] = field(default_factory=dict)
    below: dict[str, list[str]] = field(default_factory=dict)


def plan_notes(spec: InitSpec) -> Notes:
    files = f"plans/{spec.name}.yaml -i inventory/{spec.name}.yaml"  # NAME is checked: plain
    engine = "the vLLM-compatible simulator" if spec.sim else "vLLM"
    notes = Notes()
    notes.above["name"] = [
        f"A starting plan written by `orch init`: {engine} serves one model on one host,",
        "two smoke requests check it, a concurrency sweep measures it. Edit freely:",
        f"  orch validate plans/{spec.name}.yaml",
        f"  orch plan {files}     # what apply would change (touches nothing)",
        f"  orch apply {files}    # install, launch, check, benchmark",
        "Every key, its type and default: docs/plan-reference.md. Layers, ${vars.NAME},",
        "secrets: docs/plans.md.",
        "",
    ]
    notes.inline["name"] = "names the run folders: runs/<name>/"
    notes.inline["hosts"] = "a host (or group) of the inventory"
    notes.above["vars"] = ["", "Values other strings use as ${vars.NAME}."]
    notes.inline["vars.vllm_version"] = "keep it quoted: a bare 0.20 would be the number 0.2"
    notes.above["python"] = ["", "The Python environment on the host: where it lives, how it is made."]
    notes.above["install"] = ["", "Exact pins only (name==version); installed versions are checked."]
    serve = "orch sim serve" if spec.sim else "vllm serve"
    notes.above["service"] = ["", f"The model server: `{serve} MODEL` and its flags (args: long names, no dashes)."]
    notes.inline["service.args.tensor-parallel-size"] = "the GPUs one copy of the model spans"
    notes.above["health"] = ["", "How long to wait for readiness (weights, torch.compile, CUDA graphs)."]
    notes.above["smoke"] = [
        "", "Requests that must succeed once the server is up. A reasoning model served with",
        "a reasoning parser (service.args.reasoning-parser) can also require `reasoning: present`."]
    notes.inline["smoke.1.max_tokens"] = "reasoning tokens count against the limit"
    notes.above["bench"] = ["", "The benchmark: C requests at once per level, to find where throughput stops growing."]
    if spec.sim:
        notes.above["python"].append("Under your home: no root needed, and no other user's; "
                                      "shared by the simulator plans.")
        notes.inline["install.packages"] = "none: orch installs itself here (for `orch sim serve`)"
        notes.inline["service.engine"] = "`orch sim serve` speaks vLLM's protocol; engine: vllm for the real one"
        notes.inline["service.backend"] = "a supervised process: no systemd unit, no root"
        notes.above["service.sim"] = [
            "Throughput follows a measured profile (docs/simulator.md lists them); every duration",
            "is multiplied by time_scale, the start-up by startup_time_scale. Figures are reported",
            "in model time."]
    else:
        notes.inline["python.installer"] = "uv installs vLLM and torch much faster than pip"
        notes.inline["install.clean"] = "reinstall packages whose files were patched in place"
        notes.inline["install.torch_backend"] = "uv picks the PyTorch build for the host's CUDA driver"
        notes.above["env"] = [
            "", "The service's environment. A gated model (Llama, Gemma, ...) needs a Hugging Face",
            "token: uncomment the line below and export HF_TOKEN where you run orch (the value is",
            "read at run time, never stored or printed)."]
        notes.below["env"] = ["HF_TOKEN: ${env:HF_TOKEN}"]
        notes.inline["health.startup_timeout"] = "a large model takes minutes: weights, compile, graphs"
        notes.above["collect"] = ["", "Host files copied into the run folder."]
    return notes


def inventory_notes(spec: InitSpec) -> Notes:
    notes = Notes()
    notes.above["hosts"] = [
        f"The hosts of plans/{spec.name}.yaml, written by `orch init`. Anything a host leaves",
        "unset comes from ~/.ssh/config, then from SSH's defaults. More hosts: add them here and",
        "name them (or a group of them, under groups:) in the plan's hosts:. inventory/example.yaml",
        "shows every key.",
        "",
    ]
    if spec.local:
        notes.inline[f"hosts.{spec.host}.connection"] = "this machine, without SSH"
        return notes
    notes.inline[f"hosts.{spec.host}.jump"] = "reached through this host (user@host[:port])"
    notes.inline[f"hosts.{spec.host}.vars"] = "host variables: a plan reads them as ${host.gpus}"
    notes.above["ssh"] = [""]
    notes.inline["ssh.known_hosts"] = "host keys are checked; `false` is the explicit opt-out"
    return notes


def render_plan(spec: InitSpec) -> str:
    return to_yaml(plan_data(spec), plan_notes(spec))


def render_inventory(spec: InitSpec) -> str:
    return to_yaml(inventory_data(spec), inventory_notes(spec))


# --- the emitter --------------------------------------------------------------------------

_WIDE = 1 << 30  # never fold a scalar over several lines


# Strings written bare: a word or path with at least one letter (so `0.17.1` and `10.0.0.5`
# are quoted and stay strings when edited). Anything else, hostile values included, is quoted.
_BARE = re.compile(r"[A-Za-z0-9._/@+=~-]*[A-Za-z/][A-Za-z0-9._/@+=~-]*")


def scalar(value: Any) -> str:
    """One value as YAML on one line, by the serializer (flow style for lists and maps)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=_WIDE, allow_unicode=True)
    text = text.removesuffix("\n").removesuffix("\n...")
    if isinstance(value, str) and not (_BARE.fullmatch(value) and text == value):
        text = yaml.safe_dump(value, default_style='"', width=_WIDE, allow_unicode=True)
        text = text.removesuffix("\n")
    if not text.isprintable():  # a line break, even a Unicode one: escape it, double-quoted
        text = yaml.safe_dump(value, default_style='"', default_flow_style=True, width=_WIDE)
        text = text.removesuffix("\n")
    return text


def to_yaml(data: Mapping[str, Any], notes: Notes) -> str:
    """Block-style YAML of `data` with `notes` as comments. Raises RuntimeError (a bug) if the
    text does not parse back to `data`."""
    lines: list[str] = []
    _mapping(data, (), 0, "", notes, lines)
    text = "\n".join(lines) + "\n"
    if yaml.safe_load(text) != data:
        raise RuntimeError("orch init: the YAML written does not read back as the plan meant")
    return text


def _is_block(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value)
    return bool(value) and isinstance(value, list) and all(
        isinstance(item, dict) and item for item in value)


def _comment(pad: str, line: str) -> str:
    return f"{pad}# {line}" if line else ("" if not pad else f"{pad}#")


def _mapping(data: Mapping[str, Any], path: tuple[str, ...], indent: int, lead: str,
             notes: Notes, lines: list[str]) -> None:
    """`lead` replaces the indentation of the first key (`- ` of a list item)."""
    pad = " " * indent
    for index, (key, value) in enumerate(data.items()):
        here = (*path, str(key))
        dotted = ".".join(here)
        lines += [_comment(pad, line) for line in notes.above.get(dotted, [])]
        head = f"{lead if index == 0 and lead else pad}{scalar(key)}:"
        eol = f"  # {notes.inline[dotted]}" if dotted in notes.inline else ""
        if isinstance(value, dict) and value:
            lines.append(head + eol)
            _mapping(value, here, indent + 2, "", notes, lines)
        elif _is_block(value):
            lines.append(head + eol)
            for number, item in enumerate(value):
                _mapping(item, (*here, str(number)), indent + 4, f"{pad}  - ", notes, lines)
        elif value is None:
            lines.append(head + eol)
        else:
            lines.append(f"{head} {scalar(value)}{eol}")
        lines += [_comment(pad + "  ", line) for line in notes.below.get(dotted, [])]


# --- which value a loader's complaint is about ------------------------------------------------

_PLAN_FIELDS: dict[str, str] = {
    "name": "name", "description": "model", "hosts": "host", "vars.vllm_version": "vllm_version",
    "python.venv": "vllm_version", "install.packages": "vllm_version",
    "service.sim.vllm_version": "vllm_version", "service.model": "model",
    "service.served_model_name": "served_model_name",
    "service.args.tensor-parallel-size": "tensor_parallel_size",
}
_HOST_FIELDS = {"address": "host", "port": "port", "user": "user",
                "identity_file": "identity_file", "jump": "jump"}


def _under(field_path: str, prefix: str) -> bool:
    return field_path == prefix or field_path.startswith(prefix + ".")


def plan_field_attr(field_path: str | None) -> str | None:
    """The InitSpec attribute whose value a plan field holds (None: a constant of ours)."""
    return next((attr for prefix, attr in _PLAN_FIELDS.items()
                 if field_path and _under(field_path, prefix)), None)


def inventory_field_attr(spec: InitSpec, field_path: str | None) -> str | None:
    """The same for an inventory field (`hosts.NAME.port`)."""
    prefix = f"hosts.{spec.host}"
    if not field_path or not _under(field_path, prefix):
        return None
    rest = field_path[len(prefix) + 1:].split(".", 1)[0]
    return _HOST_FIELDS.get(rest, "host" if not rest else None)
