"""What an engine's log says about why its server died: the seam's types and the matching.

An engine module keeps a table of `Signature`s (regexes over the exact texts its server, torch,
NCCL and the hub print, each with a cause and a fix built from what it captured; most specific
first); `diagnose(text, signatures)` finds them. A signature may `cover` more generic ones (a
weight-load OOM also prints torch's "CUDA out of memory"), which are then not reported again.
When a log holds several attempts (the service log is appended to), the last occurrence is the
evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator import masking

Level = Literal["error", "warning"]
Details = dict[str, Any]
Explain = Callable[[re.Match[str], str], tuple[str, str, Details]]  # -> (cause, fix, details)
@dataclass(frozen=True)
class Diagnosis:
    key: str
    cause: str
    fix: str
    evidence_line: str
    details: Details = field(default_factory=dict)
    level: Level = "error"
    related: tuple[str, ...] = ()  # earlier lines that explain it (not in the log's tail)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "level": self.level,
            "cause": self.cause,
            "fix": self.fix,
            "evidence_line": self.evidence_line,
            "related_lines": list(self.related),
            "details": self.details,
        }


@dataclass(frozen=True)
class Signature:
    key: str
    pattern: re.Pattern[str]
    explain: Explain
    covers: tuple[str, ...] = ()
    level: Level = "error"
    related: re.Pattern[str] | None = None  # other lines worth quoting with the evidence
    fallback: bool = False  # reported only when no other error explains the log



# A wrapper's words around the real error ("see the root cause above"): never the evidence
# when the error itself was printed too.
WRAPPER = re.compile(r"root cause above|check the stack trace above|stack trace \(above\)")


def diagnose(text: str, signatures: Sequence[Signature]) -> list[Diagnosis]:
    """Every signature of the table found in `text`, errors first, most specific first, one
    each."""
    found: list[Diagnosis] = []
    covered: set[str] = set()
    for signature in signatures:
        if signature.key in covered:
            continue
        matches = list(signature.pattern.finditer(text))
        if not matches:
            continue
        if signature.level == "warning":
            found += [_diagnosis(signature, m, text) for m in _unique_by_group(matches)]
        else:
            causes = [m for m in matches if not WRAPPER.search(m.group(0))] or matches
            found.append(_diagnosis(signature, causes[-1], text))
        covered.update(signature.covers)
    fallbacks = {s.key for s in signatures if s.fallback}
    if any(d.level == "error" and d.key not in fallbacks for d in found):
        found = [d for d in found if d.key not in fallbacks]
    return sorted(found, key=lambda d: d.level != "error")


def _unique_by_group(matches: list[re.Match[str]]) -> list[re.Match[str]]:
    seen: dict[str, re.Match[str]] = {}
    for match in matches:
        seen.setdefault(match.group(1), match)
    return list(seen.values())


def _diagnosis(signature: Signature, match: re.Match[str], text: str) -> Diagnosis:
    cause, fix, details = signature.explain(match, text)
    related: list[str] = []
    if signature.related is not None:
        for found in signature.related.finditer(text):
            line = masking.mask(_line_at(text, found.start()))[:300]
            if line not in related:
                related.append(line)
    return Diagnosis(
        key=signature.key,
        cause=masking.mask(cause),
        fix=fix,
        evidence_line=masking.mask(_line_at(text, match.start())),
        details=details,
        level=signature.level,
        related=tuple(related[-3:]),
    )


def _line_at(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end != -1 else len(text)].strip()
