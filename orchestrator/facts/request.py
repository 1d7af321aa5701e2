"""What a step asks the probe for (`ProbeRequest`); the runner merges every step's request
into the one the host's program answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import ProbeError


@dataclass
class ProbeRequest:
    host: bool = True
    venv: str | None = None
    interpreter: str | None = None  # where is it on the host's PATH (to create the venv)?
    record: list[str] = field(default_factory=list)
    verify_all: bool = False  # hash every RECORD file, ignoring the host's stat cache
    # The engine's builds (Engine.builds, a regex of distributions): the installed one's
    # version and flag names (parsers, backends), `Facts.engine_build`.
    engine_builds: str | None = None
    files: dict[str, str | None] = field(default_factory=dict)  # path -> desired sha256
    service: dict[str, Any] | None = None
    guards: dict[str, dict[str, Any]] = field(default_factory=dict)  # command -> creates/unless
    # More supervised processes beside the service, by name (a Ray node of a cluster).
    units: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The parameters of a fact without a field above, by its request key (docs/concepts.md,
    # "Adding a host fact"); a later step's value wins.
    asks: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: ProbeRequest) -> ProbeRequest:
        if self.venv and other.venv and self.venv != other.venv:
            raise ProbeError(f"two steps ask about different venvs: {self.venv}, {other.venv}")
        return ProbeRequest(
            host=self.host or other.host,
            venv=self.venv or other.venv,
            interpreter=self.interpreter or other.interpreter,
            record=sorted({*self.record, *other.record}),
            verify_all=self.verify_all or other.verify_all,
            engine_builds=self.engine_builds or other.engine_builds,
            files={**self.files, **other.files},
            service=other.service or self.service,
            guards={**self.guards, **other.guards},
            units={**self.units, **other.units},
            asks={**self.asks, **other.asks},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "venv": self.venv,
            "interpreter": self.interpreter,
            "record": self.record,
            "verify_all": self.verify_all,
            "engine_builds": self.engine_builds,
            "files": [{"path": p, "sha256": d} for p, d in sorted(self.files.items())],
            "service": self.service,
            "guards": self.guards,
            "units": self.units,
            **self.asks,
        }
