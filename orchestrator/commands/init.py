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

This module parses the flags, asks the questions and prints; `orchestrator/init/` does the
rest (the spec and its checks, the documents, their validation and writing).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.init.spec import InitSpec

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).

T = TypeVar("T")


def _gpus(text: str) -> int:
    from orchestrator.init.spec import BadValue, gpu_count

    try:
        return gpu_count(text)
    except BadValue as bad:
        raise argparse.ArgumentTypeError(bad.message) from None


def configure(parser: argparse.ArgumentParser) -> None:
    from orchestrator.init.spec import VLLM_VERSION  # configured only when init runs

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
    from orchestrator.console import make_console
    from orchestrator.init.gather import InitFlags, gather
    from orchestrator.init.spec import FLAGS, BadValue
    from orchestrator.init.staged_write import write_files
    from orchestrator.runs.layout import refuse_inside_run

    parser: argparse.ArgumentParser = args.parser
    console = make_console()
    origins = dict(FLAGS)  # InitSpec attribute -> the flag a bad value is blamed on
    refuse_inside_run(args.dir, "--dir")  # before a question is asked
    flags = InitFlags(
        vllm_version=args.vllm_version, name=args.name, host=args.host, user=args.user,
        port=args.port, identity_file=args.identity_file, jump=args.jump, model=args.model,
        served_model_name=args.served_model_name, tensor_parallel_size=args.tensor_parallel_size,
        sim=args.sim)
    try:
        spec = gather(flags, _Asker(console) if _interactive(args) else None, origins)
        written = write_files(spec, args.dir, force=args.force)
    except BadValue as bad:
        parser.error(f"{origins.get(bad.attr, bad.attr)}: {bad.message}")
    _report(spec, written)
    return 0


def _interactive(args: argparse.Namespace) -> bool:
    # a closed stdin (`<&-`) leaves sys.stdin None: nothing to ask
    return not args.yes and sys.stdin is not None and sys.stdin.isatty()


class _Asker:
    """Questions on the terminal; an answer that cannot make a plan is asked again."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def ask(self, question: str, parse: Callable[[str], T], default: str | None = None,
            choices: list[str] | None = None) -> T:
        from rich.prompt import Prompt

        from orchestrator.errors import OrchError
        from orchestrator.init.spec import BadValue

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
