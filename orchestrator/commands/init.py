"""`orch init [NAME]`: a starting plan and inventory for one host, from flags or a few questions.

Writes `plans/NAME.yaml` and `inventory/NAME.yaml` under `--dir`. Both are validated by orch's
own loaders (and the compile `orch validate` runs) before they are put in place: each is
written to a temporary file beside its target, loaded, then renamed, so a bad value leaves
nothing behind and is reported against the flag that gave it (exit 64). Existing files are
kept unless `--force` (exit 1 naming them).

On a terminal, values the flags leave out are asked for (host, simulator or vLLM, model,
GPUs). Anywhere else, or with `--yes`, nothing is asked: the host is this machine, the engine
is the simulator when neither a model nor a remote host is named (a plan that runs right
away, no GPU) and vLLM otherwise, and a vLLM plan needs `--model`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.commands.init_plan import HostArg, InitSpec
    from orchestrator.errors import PlanError

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).

T = TypeVar("T")


def _gpus(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GPUs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 GPU, got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    from orchestrator.commands.init_plan import VLLM_VERSION  # configured only when init runs

    parser.add_argument(
        "name", nargs="?", metavar="NAME",
        help="plan name: writes plans/NAME.yaml and inventory/NAME.yaml and names runs/NAME/ "
             "(default: from the model, e.g. qwen3-8b, or sim-qwen3-8b on the simulator)")
    where = parser.add_argument_group("the host")
    where.add_argument(
        "--host", metavar="HOST",
        help="the GPU host: an address, user@address[:port] (IPv6 in brackets), or localhost "
             "for this machine without SSH (connection: local); default localhost")
    where.add_argument("--user", help="SSH user (default: ~/.ssh/config, then your user name)")
    where.add_argument("--port", type=int, help="SSH port (default: ~/.ssh/config, then 22)")
    where.add_argument("--identity-file", metavar="FILE",
                       help="SSH private key on this machine (default: ~/.ssh/config, the agent)")
    where.add_argument("--jump", metavar="[USER@]HOST[:PORT]",
                       help="reach the host through this jump host (a bastion)")
    what = parser.add_argument_group("the model")
    what.add_argument("--model", help="Hugging Face model id or a path on the host, as `vllm "
                                      "serve` takes it (required for vLLM when nothing is asked)")
    what.add_argument("--served-model-name", metavar="NAME",
                      help="the name clients use in requests (default: the model id)")
    what.add_argument("--tensor-parallel-size", "--tp", type=_gpus, metavar="GPUS",
                      help="GPUs one copy of the model spans (default 1)")
    what.add_argument("--vllm-version", default=VLLM_VERSION, metavar="VERSION",
                      help=f"vLLM version to pin (default {VLLM_VERSION}, as the shipped plans)")
    what.add_argument(
        "--sim", action=argparse.BooleanOptionalAction, default=None,
        help="serve with orch's vLLM-compatible simulator instead of vLLM: no GPU, no token, "
             "runs on a laptop (--no-sim: vLLM). Default: the simulator when neither --model "
             "nor a remote --host is given")
    out = parser.add_argument_group("writing")
    out.add_argument("--dir", type=Path, default=Path("."),
                     help="where plans/ and inventory/ go (created if missing; default .)")
    out.add_argument("--force", action="store_true", help="overwrite existing files")
    out.add_argument("-y", "--yes", action="store_true",
                     help="ask nothing, take the defaults (as when stdin is not a terminal)")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "On a terminal, asks for what the flags leave out (host, engine, model, GPUs); anywhere\n"
        "else, or with --yes, asks nothing. Both files are loaded by orch before they are put in\n"
        "place: a bad value leaves nothing behind and its flag is named (exit 64).\n\n"
        "examples:\n"
        "  orch init                   this machine, on the simulator: runs as written\n"
        "  orch init qwen --host ubuntu@gpu1 --model Qwen/Qwen3-8B --tensor-parallel-size 2")
    parser.set_defaults(parser=parser)


def run(args: argparse.Namespace) -> int:
    from orchestrator.commands import init_plan as ip
    from orchestrator.console import make_console
    from orchestrator.runs.layout import refuse_inside_run

    parser: argparse.ArgumentParser = args.parser
    console = make_console()
    origins = dict(ip.FLAGS)  # InitSpec attribute -> the flag a bad value is blamed on
    refuse_inside_run(args.dir, "--dir")  # before a question is asked
    try:
        spec = _spec(args, _Asker(console) if _interactive(args) else None, origins)
        written = _write(spec, args.dir, force=args.force)
    except ip.BadValue as bad:
        parser.error(f"{origins.get(bad.attr, bad.attr)}: {bad.message}")
    _report(spec, written)
    return 0


def _interactive(args: argparse.Namespace) -> bool:
    # a closed stdin (`<&-`) leaves sys.stdin None: nothing to ask
    return not args.yes and sys.stdin is not None and sys.stdin.isatty()


# --- gathering the values ---------------------------------------------------------------------

class _Asker:
    """Questions on the terminal; an answer that cannot make a plan is asked again."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def ask(self, question: str, parse: Callable[[str], T], default: str | None = None,
            choices: list[str] | None = None) -> T:
        from rich.prompt import Prompt

        from orchestrator.commands.init_plan import BadValue
        from orchestrator.errors import OrchError

        while True:
            try:
                answer = Prompt.ask(question, console=self.console, default=default,
                                    choices=choices, case_sensitive=False)
            except EOFError:
                raise OrchError("no answer (end of input)",
                                hint="give the values as flags; see `orch init --help`") from None
            try:
                return parse((answer or "").strip())
            except BadValue as bad:
                self.console.print(bad.message, style="red", markup=False, highlight=False)


def _spec(args: argparse.Namespace, asker: _Asker | None, origins: dict[str, str]) -> InitSpec:
    """The InitSpec from the flags, asking for what they leave out when `asker` is given."""
    from orchestrator.commands import init_plan as ip

    # Every flag is checked before the first question: a bad one is not found after answers.
    name = None if args.name is None else ip.plan_name(args.name)
    flag_target = None if args.host is None else ip.parse_host_arg(args.host)
    flag_model = None if args.model is None else ip.model_name("model", args.model)
    served = (None if args.served_model_name is None
              else ip.model_name("served_model_name", args.served_model_name))
    identity = (None if args.identity_file is None
                else ip.text_value("identity_file", args.identity_file))
    jump = None if args.jump is None else _jump(args.jump)
    version = ip.text_value("vllm_version", args.vllm_version)
    if args.user is not None:
        ip.user_name(args.user)

    if flag_target is not None:
        target = flag_target
    elif asker is not None:
        target = asker.ask("[bold]Host[/]: localhost for this machine, or address or "
                           "user@address[:port] for SSH", ip.parse_host_arg, default=ip.LOCAL)
    else:
        target = ip.HostArg(None)
    target = _connection(args, target, origins)

    sim = args.sim
    if sim is None and asker is not None:
        sim = asker.ask("[bold]Engine[/]: orch's simulator (no GPU needed) or vLLM", _engine,
                        default="sim" if target.address is None else "vllm",
                        choices=["sim", "vllm"])
    elif sim is None:
        sim = target.address is None and flag_model is None

    if flag_model is not None:
        model = flag_model
    elif asker is not None:
        model = asker.ask("[bold]Model[/]: a Hugging Face id or a path on the host",
                          lambda text: ip.model_name("model", text),
                          default=ip.SIM_MODEL if sim else None)
    elif sim:
        model = ip.SIM_MODEL
    else:
        raise ip.BadValue("model", "required for a vLLM plan when nothing is asked (stdin is not "
                                   "a terminal, or --yes); or --sim for the simulator")

    default_gpus = ip.SIM_GPUS if model == ip.SIM_MODEL else 1
    if args.tensor_parallel_size is not None:
        gpus = args.tensor_parallel_size
    elif asker is not None:
        gpus = asker.ask("[bold]GPUs[/] the model spans (tensor parallel size)", _gpu_answer,
                         default=str(default_gpus))
    else:
        gpus = default_gpus

    return ip.InitSpec(
        name=name if name is not None else ip.default_name(model, sim), target=target,
        model=model, tensor_parallel_size=gpus, sim=sim, vllm_version=version,
        served_model_name=served, identity_file=identity, jump=jump)


def _connection(args: argparse.Namespace, target: HostArg, origins: dict[str, str]) -> HostArg:
    """--user and --port merged into the parsed --host; SSH settings need an SSH host."""
    from dataclasses import replace

    from orchestrator.commands import init_plan as ip

    ssh_flags = {"user": args.user, "port": args.port, "identity_file": args.identity_file,
                 "jump": args.jump}
    given = [attr for attr, value in ssh_flags.items() if value is not None]
    if target.address is None and given:
        raise ip.BadValue(given[0], "an SSH setting, but the host is localhost (this machine, "
                                    "reached without SSH); give --host ADDRESS")
    for attr, inline in (("user", target.user), ("port", target.port)):
        flag = ssh_flags[attr]
        if inline is not None and flag is not None and flag != inline:
            raise ip.BadValue(attr, f"{flag} contradicts the {attr} in --host ({inline})")
        if inline is not None and flag is None:
            origins[attr] = origins["host"]  # a bad value is the --host's
    if args.user is not None:
        target = replace(target, user=args.user)
    if args.port is not None:
        target = replace(target, port=args.port)
    return target


def _engine(text: str) -> bool:
    from orchestrator.commands.init_plan import BadValue

    if text.lower() not in ("sim", "vllm"):
        raise BadValue("sim", "answer sim or vllm")
    return text.lower() == "sim"


def _gpu_answer(text: str) -> int:
    from orchestrator.commands.init_plan import BadValue

    try:
        return _gpus(text)
    except argparse.ArgumentTypeError as error:
        raise BadValue("tensor_parallel_size", str(error)) from None


def _jump(text: str) -> str:
    from orchestrator.commands.init_plan import parse_host_arg

    parse_host_arg(text, "jump", allow_local=False)  # the same grammar as --host; kept as written
    return text.strip()


# --- writing ----------------------------------------------------------------------------------

def _write(spec: InitSpec, directory: Path, *, force: bool) -> list[tuple[Path, bool]]:
    """Validate, then put both files in place; (path, overwritten) for each. On any failure
    nothing is left behind: no temporary file, no directory this call created."""
    from orchestrator.commands import init_plan as ip
    from orchestrator.errors import OrchError

    texts = {directory / "plans" / f"{spec.name}.yaml": ip.render_plan(spec),
             directory / "inventory" / f"{spec.name}.yaml": ip.render_inventory(spec)}
    existing = [path for path in texts if os.path.lexists(path)]
    if existing and not force:
        raise OrchError(f"{_and(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                        "nothing was written", hint="pass --force to overwrite")
    created: list[Path] = []
    staged: dict[Path, Path] = {}
    placed: list[Path] = []
    try:
        for path, text in texts.items():
            created += _make_dirs(path.parent)
            staged[path] = _stage(path, text)
        plan_file, inventory_file = staged.values()
        _validate(spec, plan_file, inventory_file)
        for path, temporary in staged.items():
            _place(temporary, path, force=force)
            placed.append(path)
    except BaseException as error:
        for temporary in staged.values():
            _remove(temporary)
        if not force:
            for path in placed:  # the inventory could not follow the plan: take it back
                _remove(path)
        for folder in reversed(created):
            with contextlib.suppress(OSError):  # not empty: someone else's files now
                folder.rmdir()
        if isinstance(error, OSError):  # a full disk, a --dir that is a file, ...
            where = f" {error.filename}" if error.filename else ""
            raise OrchError(f"cannot write{where}: {error.strerror or error}") from None
        raise
    return [(path, path in existing) for path in texts]


def _and(paths: list[Path]) -> str:
    return " and ".join(str(path) for path in paths)


def _make_dirs(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; the ones created, outermost first."""
    missing: list[Path] = []
    for candidate in [folder, *folder.parents]:
        if os.path.lexists(candidate):
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        candidate.mkdir()
    return list(reversed(missing))


def _stage(path: Path, text: str) -> Path:
    """A temporary file beside `path` (same file system, so the rename is atomic). Its name
    is fixed, never built from NAME."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=".orch-init-", suffix=".yaml")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(text)
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(name, 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
    return Path(name)


def _place(temporary: Path, path: Path, *, force: bool) -> None:
    from orchestrator.errors import OrchError

    if force:
        os.replace(temporary, path)
        return
    try:
        os.link(temporary, path)  # fails if the file appeared meanwhile: never clobbers it
    except FileExistsError:
        raise OrchError(f"{path} already exists; nothing was written",
                        hint="pass --force to overwrite") from None
    except OSError:  # no hard links on this file system: check, then rename
        if os.path.lexists(path):
            raise OrchError(f"{path} already exists; nothing was written",
                            hint="pass --force to overwrite") from None
        os.replace(temporary, path)
        return
    os.unlink(temporary)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _validate(spec: InitSpec, plan_file: Path, inventory_file: Path) -> None:
    """Load both files as `orch plan` would: a complaint about a value from the command line
    becomes a BadValue naming it; one about our own text is a bug, said as such."""
    from orchestrator.apply.compile import check
    from orchestrator.commands import init_plan as ip
    from orchestrator.errors import InventoryError, PlanError
    from orchestrator.inventory import load_inventory
    from orchestrator.plan.loader import load_plan

    try:
        loaded = load_plan(plan_file)
        check(loaded)  # what `orch validate` also compiles: the launch command, the steps
    except PlanError as error:
        raise _blame(error, ip.plan_field_attr(error.field), "plan") from None
    try:
        inventory = load_inventory(inventory_file)
    except InventoryError as error:
        # load_inventory re-raises the located PlanError as text; that error is its context.
        located = error.__context__
        if not isinstance(located, PlanError):
            raise _bug(error) from None
        raise _blame(located, ip.inventory_field_attr(spec, located.field), "inventory") from None
    try:
        inventory.select(loaded.plan.hosts)
    except InventoryError as error:
        raise _bug(error) from None


def _blame(error: PlanError, attr: str | None, document: str) -> Exception:
    from orchestrator.commands.init_plan import BadValue

    if attr is None:
        return _bug(error)
    message = error.message
    if error.field and message.startswith(f"{error.field}: "):
        message = message[len(error.field) + 2:]
    if error.hint:
        message += f"; {error.hint}"
    where = f" ({error.field} in the {document})" if error.field else ""
    return BadValue(attr, message + where)


def _bug(error: Exception) -> Exception:
    from orchestrator.errors import OrchError

    return OrchError(f"orch init wrote a file orch cannot load (a bug in orch init): {error}")


# --- the report -------------------------------------------------------------------------------

def _report(spec: InitSpec, written: list[tuple[Path, bool]]) -> None:
    (plan, plan_over), (inventory, inventory_over) = written
    engine = "the simulator" if spec.sim else f"vLLM {spec.vllm_version}"
    target = spec.target
    if target.address is None:
        reach = "this machine, without SSH"
    else:
        reach = f"{target.user + '@' if target.user else ''}{target.address}"
        reach += f":{target.port}" if target.port else ""
        reach += f" via {spec.jump}" if spec.jump else ""
    print(f"{'overwrote' if plan_over else 'wrote'} {plan}: {spec.model} on {engine}, "
          f"{spec.tensor_parallel_size} GPU{'s' if spec.tensor_parallel_size > 1 else ''}")
    print(f"{'overwrote' if inventory_over else 'wrote'} {inventory}: {spec.host} ({reach})")
    files = f"{shlex.quote(str(plan))} -i {shlex.quote(str(inventory))}"
    print("next:")
    print(f"  orch plan {files}    # what apply would change; touches nothing")
    print(f"  orch apply {files}   # install, launch, smoke checks, benchmark")
    if not spec.sim:
        print("a gated model (Llama, Gemma, ...) needs a token: uncomment HF_TOKEN under env: "
              "in the plan and run apply as HF_TOKEN=... orch apply ...")
