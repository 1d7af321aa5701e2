"""A fleet's level in the sweep's table (pure): the requests each replica was sent as the
router counted them (`8/8/8`), and a note per replica that failed requests, with the router's
retries. Levels without a `router` block show nothing of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.bench.fleet_summary import BLOCK
from orchestrator.runs.run_records import LevelResult


def router_block(result: LevelResult) -> Mapping[str, Any] | None:
    block = result.extra(BLOCK)
    return block if isinstance(block, Mapping) else None


def _count(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else "?"


def _rows(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in block.get("replicas") or [] if isinstance(r, Mapping)]


def replica_cell(result: LevelResult) -> str:
    """`8/8/8`: the attempts the router sent each replica over the level (in the order of
    their URLs); `-` without the router's counts."""
    block = router_block(result)
    rows = _rows(block) if block else []
    if not rows or not any("processed" in r for r in rows):
        return "-"
    return "/".join(_count(r.get("processed")) for r in rows)


def replica_name(url: Any) -> str:
    return str(url).split("://", 1)[-1].rstrip("/")


def fleet_notes(result: LevelResult) -> list[str]:
    """Each replica whose requests failed (the router's count) and the router's retries."""
    block = router_block(result)
    if not block:
        return []
    notes = [f"replica {replica_name(r.get('url'))}: {_count(r.get('failed'))} failed"
             for r in _rows(block) if isinstance(r.get("failed"), int | float) and r["failed"] > 0]
    retries = block.get("retries")
    if isinstance(retries, int | float) and retries > 0:
        notes.append(f"router retried {retries:g}")
    if block.get("problem"):
        notes.append(str(block["problem"])[:120])
    return notes


def fleet_replicas(levels: Sequence[LevelResult]) -> int | None:
    """How many replicas the router had (the most any level saw); None: not a fleet run."""
    counts = [int(block["workers"]) for level in levels
              if (block := router_block(level)) is not None and isinstance(block.get("workers"), int)]
    return max(counts) if counts else None


def has_fleet(results: Sequence[LevelResult]) -> bool:
    return any(router_block(r) is not None for r in results)


CAPTION = ("Per replica: the requests the router sent each replica over the level, as it counted "
           "them (attempts: a failed one and its retry elsewhere both count), replicas in the order "
           "of their URLs.")
