"""`orch sim ...`: the simulator's command line (argparse only; the server loads on demand).

`orch sim serve MODEL [flags]` takes vLLM's flags too, including ones it does not know, so its
arguments are handed over verbatim and parsed by `orchestrator.sim.options`.
`orch sim hub REPO=FOLDER ...` serves a stand-in Hugging Face hub (hub_cli.py).
"""

from __future__ import annotations

import argparse
import sys

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    serve = subs.add_parser(
        "serve",
        help="run a vLLM-compatible simulated server (orch sim serve --help for its flags)",
        add_help=False,
        prefix_chars="\0",  # every argument, flags included, goes to the serve parser
    )
    serve.add_argument("sim_argv", nargs=argparse.REMAINDER,
                       help="MODEL and the flags of `vllm serve` and of the simulator")
    hub = subs.add_parser("hub", help="serve folders as a stand-in Hugging Face hub (HF_ENDPOINT)",
                          description="Publish each FOLDER as repository REPO (branch main) and "
                                      "serve the Hub API huggingface_hub downloads with.")
    from orchestrator.sim.hub_cli import add_arguments

    add_arguments(hub)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "sim_command", None) == "hub":
        from orchestrator.sim.hub_cli import run as run_hub

        return run_hub(args)
    if getattr(args, "sim_command", None) != "serve":
        from orchestrator.exit_codes import ExitCode

        print("usage: orch sim serve MODEL [--profile NAME] [--time-scale X] [vllm flags ...]\n"
              "       orch sim hub [--port N] [--root DIR] [--private TOKEN] REPO=FOLDER ...",
              file=sys.stderr)
        return ExitCode.USAGE
    from orchestrator.sim.serve import main

    return main(list(args.sim_argv))
