"""`Facts`: the probe's answer, typed; `parse_answer` reads the program's JSON into it, each
fact's parser its own keys, answering the fields it fills (pure; tested on captured
answers)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from orchestrator.errors import ProbeError
from orchestrator.facts.engine_build import EngineBuild
from orchestrator.facts.files import FileFacts
from orchestrator.facts.guards import Guard
from orchestrator.facts.host import HostFacts
from orchestrator.facts.installed_files import RecordFacts
from orchestrator.facts.program import discovered
from orchestrator.facts.service import ServiceFacts
from orchestrator.facts.venv import VenvFacts


@dataclass
class Facts:
    host: HostFacts = field(default_factory=HostFacts)
    venv: VenvFacts | None = None
    record: dict[str, RecordFacts] = field(default_factory=dict)
    record_stats: dict[str, int] = field(default_factory=dict)  # files checked, hashed
    engine_build: EngineBuild | None = None  # when asked for and the engine is installed
    files: dict[str, FileFacts] = field(default_factory=dict)
    service: ServiceFacts | None = None
    guards: dict[str, Guard] = field(default_factory=dict)  # command name -> its guard
    units: dict[str, ServiceFacts] = field(default_factory=dict)  # name -> like `service`
    probe_seconds: float = 0.0
    # The value of a fact without a field above, by name; its module reads it back typed.
    extra: dict[str, Any] = field(default_factory=dict)


def parse_answer(text: str) -> Facts:
    """The program's JSON answer -> Facts. Pure."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        raise ProbeError(f"the fact program printed something that is not JSON: {text[-300:]!r}") from None
    if not isinstance(data, dict) or data.get("probe_version") != 1:
        raise ProbeError(f"unexpected fact program answer: {line[:300]!r}")
    found: dict[str, Any] = {}
    for fact in discovered():
        found.update(fact.parse(data))
    named = {f.name for f in fields(Facts)} - {"extra", "probe_seconds"}
    return Facts(**{k: v for k, v in found.items() if k in named},
                 extra={k: v for k, v in found.items() if k not in named},
                 probe_seconds=float(data.get("probe_seconds", 0)))
