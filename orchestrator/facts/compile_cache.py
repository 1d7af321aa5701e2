"""The service's compile cache before a launch: whether the folder of its key holds anything an
engine compiled (a warm start needs it; engines/compile_cache.py)."""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict

from orchestrator.facts.fact import Fact

if TYPE_CHECKING:
    from orchestrator.facts.answer import Facts

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def compile_cache_facts(spec: Dict[str, Any]) -> Dict[str, Any]:
    """{"path": the folder, ~ expanded, "filled": whether any file is under it}; the walk stops
    at the first file (a large cache is not listed)."""
    path = os.path.join(os.path.expanduser(str(spec["root"])), str(spec["subdir"]))
    filled = False
    for _, _, names in os.walk(path):
        if names:
            filled = True
            break
    return {"path": path, "filled": filled}


def gather_compile_cache(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["compile_cache"]`: {"root": the cache root, "subdir": what a warm start loads}."""
    if request.get("compile_cache"):
        answer["compile_cache"] = compile_cache_facts(request["compile_cache"])


# == controller side ==


@dataclass(frozen=True)
class CompileCacheFacts:
    path: str
    filled: bool


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    found = answer.get("compile_cache")
    if isinstance(found, dict):
        return {"compile_cache": CompileCacheFacts(
            path=str(found.get("path", "")), filled=bool(found.get("filled")))}
    return {}


def compile_cache_of(facts: Facts) -> CompileCacheFacts | None:
    found = facts.extra.get("compile_cache")
    return found if isinstance(found, CompileCacheFacts) else None


FACT = Fact(gather="gather_compile_cache", parse=parse)
