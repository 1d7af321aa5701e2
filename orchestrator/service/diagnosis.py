"""Why did the server die? Its engine's crash signatures (engines/vllm/signatures.py for vLLM
and the simulator, which prints vLLM's texts) found in its log, with the fix in plan terms;
`tail` is what to show when nothing is recognised."""

from __future__ import annotations

from orchestrator import masking
from orchestrator.engines import engine
from orchestrator.engines.signatures import Diagnosis, Signature
from orchestrator.engines.signatures import diagnose as _match

__all__ = ["Diagnosis", "Signature", "diagnose", "tail"]


def diagnose(text: str, engine_name: str = "vllm") -> list[Diagnosis]:
    """What the log `text` of a server of that engine says about its death."""
    return _match(text, engine(engine_name).signatures)


def tail(text: str, lines: int = 30) -> list[str]:
    """The last `lines` non-empty lines, masked (what to show when nothing is recognised)."""
    kept = [line for line in text.splitlines() if line.strip()]
    return [masking.mask(line) for line in kept[-lines:]]
