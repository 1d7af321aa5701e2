"""Why did the server die? Its engine's crash signatures (engines/vllm/signatures.py for vLLM
and the simulator, which prints vLLM's texts) found in its log, with the fix in plan terms;
`tail` is what to show when nothing is recognised."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator import masking
from orchestrator.engines import engine
from orchestrator.engines.signatures import Diagnosis, Signature
from orchestrator.engines.signatures import diagnose as _match
from orchestrator.service.backends import tail_command
from orchestrator.transport.base import Transport

if TYPE_CHECKING:
    from orchestrator.runs.writer import RunFolder
    from orchestrator.service.step import ServiceStep

__all__ = ["Diagnosis", "Signature", "diagnose", "explain_death", "tail"]


def diagnose(text: str, engine_name: str) -> list[Diagnosis]:
    """What the log `text` of a server of that engine says about its death."""
    return _match(text, engine(engine_name).signatures)


def tail(text: str, lines: int = 30) -> list[str]:
    """The last `lines` non-empty lines, masked (what to show when nothing is recognised)."""
    kept = [line for line in text.splitlines() if line.strip()]
    return [masking.mask(line) for line in kept[-lines:]]


def explain_death(transport: Transport, step: ServiceStep,
                  folder: RunFolder | None) -> tuple[str, str | None]:
    """Why the server went away (mid-sweep, or under the smoke checks), from its log, there
    and then: the words to show, and the known cause (None: nothing explains it, it may be relaunched)."""
    host = transport.host
    log = transport.run(tail_command(step.paths, 400), check=False).stdout
    found = diagnose(log, step.spec.engine)
    diagnoses = [d for d in found if d.level == "error"]
    if folder is not None and found:
        folder.write_diagnosis(host, [d.to_json() for d in found])
    if not diagnoses:
        hints = "".join(f"\n  seen:  {d.cause}\n  log:   {d.evidence_line}" for d in found
                        if d.key != "unknown-vllm-env")
        return ": no known cause in the service log (orch logs PLAN shows it)" + hints, None
    return "".join(f"\n  cause: {d.cause}\n  fix:   {d.fix}\n  log:   {d.evidence_line}"
                   for d in diagnoses), diagnoses[0].cause
