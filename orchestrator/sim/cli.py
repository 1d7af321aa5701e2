"""`orch sim ...`: the simulator's command line (argparse only; the server loads on demand).

`orch sim serve MODEL [flags]` takes vLLM's flags too, including ones it does not know, so its
arguments are handed over verbatim and parsed by `orchestrator.sim.options`.
"""

from __future__ import annotations

import argparse
import sys


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


def run(args: argparse.Namespace) -> int:
    if getattr(args, "sim_command", None) != "serve":
        from orchestrator.exit_codes import ExitCode

        print("usage: orch sim serve MODEL [--profile NAME] [--time-scale X] [vllm flags ...]",
              file=sys.stderr)
        return ExitCode.USAGE
    from orchestrator.sim.serve import main

    return main(list(args.sim_argv))
