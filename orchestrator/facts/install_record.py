"""The host's install record (`<venv>/.orch/install.json`): the digest of the install part of
the plan (python, packages, files, model) that last converged there, and the run that did it.
An apply whose install digest matches it says the install is skipped (apply/install_gate.py)."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional

from orchestrator.facts.common import read_text
from orchestrator.facts.fact import Fact, as_float, as_str

if TYPE_CHECKING:
    from orchestrator.facts.answer import Facts

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def install_record_facts(path: str) -> Optional[Dict[str, Any]]:
    """The record as written, or None (missing, unreadable, or not orch's)."""
    try:
        data = json.loads(read_text(os.path.expanduser(path)) or "")
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("digest"), str) else None


def gather_install_record(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["install_record"]`: {"path": the record, "digest": the plan's}."""
    if request.get("install_record"):
        answer["install_record"] = install_record_facts(request["install_record"]["path"])


# == controller side ==


@dataclass(frozen=True)
class InstallRecord:
    digest: str
    run: str  # the run folder that converged it ("" when none was written)
    written: float | None


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    found = answer.get("install_record")
    if isinstance(found, dict):
        return {"install_record": InstallRecord(
            digest=str(found.get("digest")), run=as_str(found.get("run")) or "",
            written=as_float(found.get("written")))}
    return {}


def install_record_of(facts: Facts) -> InstallRecord | None:
    found = facts.extra.get("install_record")
    return found if isinstance(found, InstallRecord) else None


FACT = Fact(gather="gather_install_record", parse=parse)
