"""What a sweep is handed to say why each level went as it did: the `Judge` protocol.

The sweep asks it for a level's verdict just before the level's file is written (the level's
`limiter` block) and for the sweep's plateau before summary.json is (its `plateau` block).
orchestrator/limits/ implements it (`limits.verdicts.Judge`); the bench layer only carries the
blocks, so a sweep without a judge writes neither, as an older orch did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from orchestrator.runs.run_records import LevelResult


class Judge(Protocol):
    def level(self, result: LevelResult, earlier: Sequence[LevelResult] = ()) -> dict[str, Any]:
        """The level's `limiter` block (`earlier`: the sweep's levels before it, whose
        figures a queueing signature is read against)."""
        ...

    def sweep(self, results: Sequence[LevelResult], knee: int | None) -> dict[str, Any]:
        """The sweep's `plateau` block (`knee`: the auto search's, when it found one)."""
        ...
