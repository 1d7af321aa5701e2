"""The flags of `vllm-router`, read from its own `--help` (argparse's text, captured per
release as flags-<version>.txt beside this module with COLUMNS=100; the real-binary test
regenerates it and compares), and the plan's `router.args` checked against them.

A flag is a switch (no value), takes one or more values, may list its choices (`--policy
{random,...}`), and says its default: a numeric default means a number is expected.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from orchestrator.engines.base import FieldProblem

PACKAGE = __name__.rpartition(".")[0]
HELP_COLUMNS = "100"  # the width the tables are captured at (argparse wraps at COLUMNS)

# Flags orch writes from the plan's own fields; `router.args` may not set them.
RESERVED = {
    "host": "router.host", "port": "router.port", "prometheus-port": "router.metrics_port",
    "prometheus-host": "router.host", "policy": "router.policy",
    "vllm-pd-disaggregation": "router.mode", "prefill": "router.mode (the replicas' roles)",
    "decode": "router.mode (the replicas' roles)",
    "worker-urls": "nothing: orch registers the ready replicas itself",
}

_OPTION = re.compile(r"^  (?:-\w, )?--([a-z0-9][a-z0-9-]*)(?: ((?:\S| (?!\s))+))?(?:\s{2,}(.*))?$")
_DEFAULT = re.compile(r"\(default:\s*([^)]*)\)")


@dataclass(frozen=True)
class RouterFlag:
    name: str  # without dashes
    takes_value: bool
    choices: tuple[str, ...] = ()
    number: str | None = None  # "int" or "float" when its default is one

    def value_problem(self, value: object) -> str | None:
        """Why `value` (a plan value: scalar, list, bool) does not fit this flag, or None."""
        if isinstance(value, bool):
            if self.takes_value:
                return f"needs a value ({self.describe()}), not {str(value).lower()}"
            return None
        if not self.takes_value:
            return "is a switch: write true (or leave it out), not a value"
        for item in value if isinstance(value, list) else [value]:
            text = str(item)
            if self.choices and text not in self.choices:
                return f"expects one of {', '.join(self.choices)}, got {text!r}"
            if self.number is not None and not _is_number(text, self.number):
                return f"expects a number ({'an integer' if self.number == 'int' else 'a decimal'}), got {text!r}"
        return None

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return {"int": "an integer", "float": "a number"}.get(self.number or "", "a value")


def _is_number(text: str, kind: str) -> bool:
    try:
        int(text) if kind == "int" else float(text)
    except ValueError:
        return False
    return True


def parse_help(text: str) -> dict[str, RouterFlag]:
    """The flags in the `options:` section of argparse's help text."""
    found: dict[str, RouterFlag] = {}
    current: list[str] = []  # name, metavar, then the description's lines

    def close() -> None:
        if current:
            name, metavar, *said = current
            found[name] = _flag(name, metavar, " ".join(said))

    in_options = False
    for line in text.splitlines():
        if line.rstrip() == "options:":
            in_options = True
            continue
        if not in_options:
            continue
        match = _OPTION.match(line)
        if match:
            close()
            current[:] = [match.group(1), match.group(2) or "", match.group(3) or ""]
        elif current:
            current.append(line.strip())
    close()
    found.pop("help", None)
    return found


def _flag(name: str, metavar: str, description: str) -> RouterFlag:
    choices: tuple[str, ...] = ()
    if metavar.startswith("{"):
        choices = tuple(metavar.split("}", 1)[0].strip("{").split(","))
    default = _DEFAULT.search(description)
    number = None
    if default is not None and not choices:
        said = default.group(1).strip()
        number = "int" if re.fullmatch(r"-?\d+", said) else \
            "float" if re.fullmatch(r"-?\d+\.\d*", said) else None
    return RouterFlag(name, takes_value=bool(metavar), choices=choices, number=number)


def table_name(version: str) -> str:
    return f"flags-{version}.txt"


@cache
def shipped_flags(version: str) -> dict[str, RouterFlag] | None:
    """The flags of `vllm-router` `version`, or None when orch ships no table for it."""
    entry = resources.files(PACKAGE).joinpath(table_name(version))
    if not entry.is_file():
        return None
    return parse_help(entry.read_text(encoding="utf-8"))


def args_problems(args: Mapping[str, object], version: str) -> list[FieldProblem]:
    """`router.args` against the `--help` of `vllm-router` `version`: unknown flags, flags
    with a field of their own, values that do not fit."""
    known = shipped_flags(version)
    if known is None:
        return []
    hint = (f"orch checks router.args against `vllm-router --help` of release {version} "
            "(a table shipped with orch)")
    out: list[FieldProblem] = []
    for key, value in args.items():
        path = ("router", "args", key)
        if key in RESERVED:
            out.append(FieldProblem(path, f"is set by orch: set {RESERVED[key]} instead"))
        elif key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            mean = f"; did you mean {RESERVED.get(near[0], near[0])}?" if near else ""
            out.append(FieldProblem(path, f"vllm-router {version} has no flag --{key}{mean}",
                                    hint=hint))
        elif (why := known[key].value_problem(value)) is not None:
            out.append(FieldProblem(path, f"--{key} {why}", hint=hint))
    return out
