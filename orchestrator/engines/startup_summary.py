"""The start-up summary every engine's log reader writes (startup.json's `phases`), built in
one place so the engines' entries keep the same keys: times in seconds since launch,
`duration_s` by the controller's clock, `engine_seconds` as the engine printed it, then the
phase's own figures (KV cache tokens, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

# The keys every entry has, in order (startup.json, runs/run_records.py `StartupPhase`).
KEYS = ("phase", "label", "start_s", "end_s", "duration_s", "engine_seconds")


class PhaseTimes(Protocol):
    """One phase as a reader tracked it."""

    @property
    def started_at(self) -> float: ...

    @property
    def ended_at(self) -> float | None: ...

    @property
    def engine_seconds(self) -> float | None: ...  # as the engine printed it

    @property
    def details(self) -> Mapping[str, Any]: ...  # its own figures


def summary(phases: Mapping[str, PhaseTimes], order: Sequence[str], labels: Mapping[str, str],
            origin: float | None) -> list[dict[str, Any]]:
    """One JSON-able entry per phase reached, in `order`."""
    start = origin or 0.0
    out: list[dict[str, Any]] = []
    for name in order:
        record = phases.get(name)
        if record is None:
            continue
        end = record.ended_at
        out.append({
            "phase": name, "label": labels[name], "start_s": round(record.started_at - start, 3),
            "end_s": None if end is None else round(end - start, 3),
            "duration_s": None if end is None else round(end - record.started_at, 3),
            "engine_seconds": record.engine_seconds, **record.details,
        })
    return out
