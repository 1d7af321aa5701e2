"""Which plan arguments name a flag of `vllm serve`, and the flags of each vLLM release orch
ships a table for.

A plan's `service.args` keys and `service.extra_args` flags are checked twice: at plan time
(`orch validate`, `orch plan`: nothing is installed yet) against the table of the release the
plan pins, and on the host after install against the installed vLLM's own parser
(preflight.py). One rule (`unknown_flags`) serves both. The tables, flags-<version>.txt
beside this module, are written by scripts/vllm_flags.py from the real package's parser, and
the real-package tests compare them with it (tests/real/test_real_vllm_flags.py).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from packaging.version import InvalidVersion, Version

from orchestrator.engines.base import FieldProblem
from orchestrator.engines.vllm.builds import RESERVED_FLAGS, version_of
from orchestrator.names import flag_name
from orchestrator.plan.models import Plan
from orchestrator.plan.source import FieldPath

log = logging.getLogger(__name__)

PACKAGE = __name__.rpartition(".")[0]  # the tables sit beside this module
PREFIX, SUFFIX = "flags-", ".txt"


def table_name(version: str) -> str:
    return f"{PREFIX}{version}{SUFFIX}"


def shipped_versions() -> list[str]:
    """The releases orch has a table for, oldest first."""
    names = [entry.name for entry in resources.files(PACKAGE).iterdir()]
    found = [n[len(PREFIX):-len(SUFFIX)] for n in names if n.startswith(PREFIX)
             and n.endswith(SUFFIX)]
    return sorted(found, key=Version)


def parse_table(text: str) -> frozenset[str]:
    """A table's flags: one a line, `#` comments."""
    return frozenset(line.strip() for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))


@cache
def shipped_flags(version: str) -> frozenset[str] | None:
    """The flags of vLLM `version` (any build: a local tag such as +cpu is the same
    release), or None when orch ships no table for it."""
    try:
        release = Version(Version(version).public)
    except InvalidVersion:
        return None
    for shipped in shipped_versions():
        if Version(shipped) == release:
            return parse_table(resources.files(PACKAGE).joinpath(table_name(shipped))
                               .read_text(encoding="utf-8"))
    return None


@dataclass(frozen=True)
class UnknownFlag:
    path: FieldPath  # ("service", "args", key) or ("service", "extra_args", index)
    flag: str  # as vLLM's parser reads it: --tensor-paralel-size
    near: str | None  # the closest known flag

    @property
    def did_you_mean(self) -> str:
        return f"; did you mean {self.near}?" if self.near else ""


def key_flag(key: str) -> str:
    """The flag a `service.args` key stands for: `max_num_seqs` and `compilation-config.mode`
    are `--max-num-seqs` and `--compilation-config` to vLLM's parser."""
    return "--" + flag_name(key.split(".", 1)[0])


def extra_flag(arg: str) -> str | None:
    """The flag an `extra_args` item names as vLLM's parser reads it (underscores folded,
    `--json-flag.key` is `--json-flag`); None for a value, `--`, or `-O3` (vLLM rewrites
    `-O<level>` itself)."""
    if not arg.startswith("-") or arg == "--" or arg.startswith("-O") or \
            re.fullmatch(r"-\d+(\.\d+)?", arg):
        return None
    name = arg.split("=", 1)[0]
    if name.startswith("--"):
        return "--" + flag_name(name[2:].split(".", 1)[0])
    return name


def unknown_flags(args: Mapping[str, object], extra_args: Sequence[str],
                  known: Collection[str], skip: Collection[str] = ()) -> list[UnknownFlag]:
    """The plan's flags that are not in `known`; `skip`: flags that have their own plan
    field (refused elsewhere, with that field named)."""
    out: list[UnknownFlag] = []
    for key in args:
        flag = key_flag(key)
        if flag[2:] not in skip and flag not in known:
            out.append(UnknownFlag(("service", "args", key), flag, _near(flag, known)))
    for index, arg in enumerate(extra_args):
        named = extra_flag(arg)
        if named is not None and named not in known and arg[:2] not in known:  # or -n4
            out.append(UnknownFlag(("service", "extra_args", index), named, _near(named, known)))
    return out


def _near(flag: str, known: Collection[str]) -> str | None:
    close = difflib.get_close_matches(flag, sorted(known), n=1)
    return close[0] if close else None


def plan_flag_problems(plan: Plan, version: str | None, *, skip: Collection[str] = (),
                       source: str = "the release the plan pins") -> list[FieldProblem]:
    """`plan`'s flags that vLLM `version` lacks, before anything is installed; none when
    orch ships no table for that version (the host's vLLM checks them after install)."""
    service = plan.service
    if service is None or not (service.args or service.extra_args):
        return []
    known = shipped_flags(version) if version else None
    if known is None:
        log.debug("service.args and extra_args not checked at plan time: %s; they are checked "
                  "against the host's vLLM once it is installed",
                  f"orch has no flag table for vLLM {version} (tables: "
                  f"{', '.join(shipped_versions())})" if version else
                  "the plan pins no vLLM version (install.packages, vars.vllm_version)")
        return []
    return [FieldProblem(
        found.path, f"vLLM {version} has no flag {found.flag}{found.did_you_mean}",
        hint=f"orch checks service.args and extra_args against the `vllm serve` flags of vLLM "
             f"{version}, {source} (a table shipped with orch); `vllm serve --help=all` "
             "lists them")
        for found in unknown_flags(service.args, service.extra_args, known, skip)]


def plan_check(plan: Plan) -> list[FieldProblem]:
    """vLLM's plan-time rule: the flags against the release the plan pins (any build), or
    names in `vars.vllm_version` when it installs none (a venv made otherwise)."""
    named = plan.vars.get("vllm_version")
    version = version_of(plan.install.pins()) or (str(named) if named else None)
    return plan_flag_problems(plan, version, skip=RESERVED_FLAGS)
