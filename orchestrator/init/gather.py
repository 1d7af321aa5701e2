"""The `InitSpec` from the flags, asking for what they leave out when there is someone to ask.

Every flag is checked before the first question, so a bad one is not found after answers.
Without an asker (stdin not a terminal, or `--yes`) nothing is asked: the host is this
machine, the engine is the simulator when neither a model nor a remote host is named, and a
vLLM plan needs `--model`. A bad value is a `BadValue`; `origins` (attribute -> flag) learns
when a value came from inside `--host`, so that the message blames the flag that gave it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from orchestrator.init.spec import (
    LOCAL,
    SIM_GPUS,
    SIM_MODEL,
    BadValue,
    HostArg,
    InitSpec,
    default_name,
    gpu_count,
    model_name,
    parse_host_arg,
    plan_name,
    text_value,
    user_name,
)

T = TypeVar("T")


@dataclass(frozen=True)
class InitFlags:
    """What the command line gave (None: left out)."""

    vllm_version: str
    name: str | None = None
    host: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    jump: str | None = None
    model: str | None = None
    served_model_name: str | None = None
    tensor_parallel_size: int | None = None
    sim: bool | None = None


class Asker(Protocol):
    """Asks one question until `parse` takes the answer (it raises BadValue otherwise)."""

    def ask(self, question: str, parse: Callable[[str], T], default: str | None = None,
            choices: list[str] | None = None) -> T: ...


def gather(flags: InitFlags, asker: Asker | None, origins: dict[str, str]) -> InitSpec:
    """The InitSpec from the flags, asking for what they leave out when `asker` is given."""
    name = None if flags.name is None else plan_name(flags.name)
    flag_target = None if flags.host is None else parse_host_arg(flags.host)
    flag_model = None if flags.model is None else model_name("model", flags.model)
    served = (None if flags.served_model_name is None
              else model_name("served_model_name", flags.served_model_name))
    identity = (None if flags.identity_file is None
                else text_value("identity_file", flags.identity_file))
    jump = None if flags.jump is None else _jump(flags.jump)
    version = text_value("vllm_version", flags.vllm_version)
    if flags.user is not None:
        user_name(flags.user)

    if flag_target is not None:
        target = flag_target
    elif asker is not None:
        target = asker.ask("[bold]Host[/]: localhost for this machine, or address or "
                           "user@address[:port] for SSH", parse_host_arg, default=LOCAL)
    else:
        target = HostArg(None)
    target = _connection(flags, target, origins)
    sim = _simulated(flags.sim, asker, target, flag_model)
    model = _model(flag_model, asker, sim)
    default_gpus = SIM_GPUS if model == SIM_MODEL else 1
    if flags.tensor_parallel_size is not None:
        gpus = flags.tensor_parallel_size
    elif asker is not None:
        gpus = asker.ask("[bold]GPUs[/] the model spans (tensor parallel size)", gpu_count,
                         default=str(default_gpus))
    else:
        gpus = default_gpus

    return InitSpec(
        name=name if name is not None else default_name(model, sim), target=target,
        model=model, tensor_parallel_size=gpus, sim=sim, vllm_version=version,
        served_model_name=served, identity_file=identity, jump=jump)


def _simulated(sim: bool | None, asker: Asker | None, target: HostArg,
               flag_model: str | None) -> bool:
    if sim is None and asker is not None:
        return asker.ask("[bold]Engine[/]: orch's simulator (no GPU needed) or vLLM", _engine,
                         default="sim" if target.address is None else "vllm",
                         choices=["sim", "vllm"])
    if sim is None:
        return target.address is None and flag_model is None
    return sim


def _model(flag_model: str | None, asker: Asker | None, sim: bool) -> str:
    if flag_model is not None:
        return flag_model
    if asker is not None:
        return asker.ask("[bold]Model[/]: a Hugging Face id or a path on the host",
                         lambda text: model_name("model", text),
                         default=SIM_MODEL if sim else None)
    if sim:
        return SIM_MODEL
    raise BadValue("model", "required for a vLLM plan when nothing is asked (stdin is not "
                            "a terminal, or --yes); or --sim for the simulator")


def _connection(flags: InitFlags, target: HostArg, origins: dict[str, str]) -> HostArg:
    """--user and --port merged into the parsed --host; SSH settings need an SSH host."""
    ssh_flags = {"user": flags.user, "port": flags.port, "identity_file": flags.identity_file,
                 "jump": flags.jump}
    given = [attr for attr, value in ssh_flags.items() if value is not None]
    if target.address is None and given:
        raise BadValue(given[0], "an SSH setting, but the host is localhost (this machine, "
                                 "reached without SSH); give --host ADDRESS")
    for attr, inline in (("user", target.user), ("port", target.port)):
        flag = ssh_flags[attr]
        if inline is not None and flag is not None and flag != inline:
            raise BadValue(attr, f"{flag} contradicts the {attr} in --host ({inline})")
        if inline is not None and flag is None:
            origins[attr] = origins["host"]  # a bad value is the --host's
    if flags.user is not None:
        target = replace(target, user=flags.user)
    if flags.port is not None:
        target = replace(target, port=flags.port)
    return target


def _engine(text: str) -> bool:
    if text.lower() not in ("sim", "vllm"):
        raise BadValue("sim", "answer sim or vllm")
    return text.lower() == "sim"


def _jump(text: str) -> str:
    parse_host_arg(text, "jump", allow_local=False)  # the same grammar as --host; kept as written
    return text.strip()
