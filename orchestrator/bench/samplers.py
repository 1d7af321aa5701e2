"""What is sampled beside the requests while a level runs: the samplers.

A sampler is started when a repeat of a level starts and stopped when it ends; between the
two it samples on a thread of its own, never on the event loop that stamps token arrivals.
Its snapshots are read only after the repeat, and the level asks the sampler for the block
it fills in the level JSON (`block`, e.g. `server_metrics`), so parsing and summing stay off
the timing path.

The server's `/metrics` scraper (server_metrics.py: `Scraper`) is the first one and every
sweep has it; a host-side sampler (nvidia-smi) is one more class passed to `run_sweep(...,
samplers=[...])`: the sweep and the level do not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Snapshot:
    """One sample: when (seconds since the repeat's origin) and the values read then."""

    t_s: float
    values: Mapping[str, float]


class Sampler(Protocol):
    """Samples during each repeat of a level; one object serves every repeat of a sweep."""

    @property
    def block(self) -> str:
        """The level JSON's key its summary fills (one per sampler of a sweep)."""
        ...

    @property
    def repeat_keys(self) -> tuple[str, ...]:
        """Figures of one repeat's summary that the level's `repeats` entries carry."""
        ...

    def start(self, origin_ns: int) -> None:
        """Begin a repeat's sampling; `origin_ns` (perf_counter_ns) is its time zero."""

    def stop(self) -> None:
        """End the repeat's sampling (a last sample taken, the thread joined)."""

    def snapshots(self) -> list[Snapshot]:
        """What the last repeat sampled, in order."""
        ...

    def summarize(self, snapshots: Sequence[Snapshot]) -> dict[str, Any]:
        """One repeat's summary (pure)."""
        ...

    def merge(self, repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The level's block from its repeats' summaries (pure); None: nothing sampled."""
        ...

    def level_figures(self, block: Mapping[str, Any] | None,
                      level: Mapping[str, Any]) -> dict[str, Any]:
        """Figures of the level itself that its block and the level's own figures make
        together (pure): the GPU sampler's tokens per joule; {} for none. They join the
        level's figures (model time included) under the names orchestrator/metrics.py gives."""
        ...


def check_blocks(samplers: Sequence[Sampler]) -> None:
    """Two samplers filling one block would overwrite each other's figures."""
    blocks = [sampler.block for sampler in samplers]
    twice = sorted({block for block in blocks if blocks.count(block) > 1})
    if twice:
        raise ValueError(f"two samplers fill the level's {', '.join(twice)}")
