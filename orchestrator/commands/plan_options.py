"""The options every command that loads a plan takes (plan, inventory, hosts, overlays,
--set): one definition, so `orch apply` and `orch status` cannot drift apart; --forks for
the commands that run hosts (apply, plan, restart)."""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.apply.forks import DEFAULT_FORKS


def add_plan_options(parser: argparse.ArgumentParser, *, plan_optional: bool = False) -> None:
    if plan_optional:
        parser.add_argument("plan", nargs="?", type=Path, help="plan file (YAML); not with --locked")
    else:
        parser.add_argument("plan", type=Path, help="plan file (YAML)")
    parser.add_argument("-i", "--inventory", type=Path,
                        help="inventory file: orch's YAML, or an Ansible YAML or INI inventory "
                             "(default inventory/local.yaml, else this machine)")
    parser.add_argument("--limit", action="append", default=[], metavar="PATTERN", type=_limit,
                        help="only these of the plan's hosts: host or group names, or patterns "
                             "such as 'gpu*' ('!gpu3' leaves one out); repeat, or "
                             "comma-separated")
    parser.add_argument("-f", "--overlay", action="append", type=Path, default=[],
                        metavar="FILE", help="overlay merged over the plan (repeatable)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                        help="set one value, e.g. --set service.port=8001 (repeatable)")


def _limit(text: str) -> str:
    """One --limit: an empty one (`--limit ''`, a variable that was not set) would narrow to
    nothing said, and run every host of the plan."""
    if not any(part.strip() for part in text.replace(":", ",").split(",")):
        raise argparse.ArgumentTypeError(
            f"expected host or group names or patterns such as gpu1,gpu2 or 'gpu*', got {text!r}")
    return text


def add_forks_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--forks", type=int, default=DEFAULT_FORKS, metavar="N",
                        help=f"work on at most N hosts at once (default {DEFAULT_FORKS}); the "
                             "nodes of a multi-node server always run all at once")


def limit_hosts(args: argparse.Namespace) -> list[str]:
    """--limit a --limit b,c -> [a, b, c] (each a name or pattern: inventory/limit.py)."""
    return [host for item in args.limit for host in item.split(",") if host]
