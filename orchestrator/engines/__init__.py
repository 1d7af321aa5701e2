"""The engines orch can launch, by the name a plan's `service.engine` gives (engines/base.py
says what an engine is; docs/concepts.md how to add one)."""

from __future__ import annotations

from orchestrator.engines import sim, vllm
from orchestrator.engines.base import Engine

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (vllm.ENGINE, sim.ENGINE)}


def engine(name: str) -> Engine:
    """The engine of that name (the plan's model admits only registered names)."""
    return ENGINES[name]
