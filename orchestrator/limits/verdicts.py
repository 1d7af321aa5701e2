"""The limits joined to a run (pure): what the plan and the host say (`plan_facts`), a level's
verdict as the level file keeps it (`verdict_json` / `verdict_of`), and a sweep's plateau
(`Plateau`: where it stops rising, what held it there, what to try) as summary.json, the
sweep's table, `orch compare` and the report show it.

`Judge` is what the sweep is handed (bench/judge.py's protocol): it judges each level before
the level is written, and the whole sweep before summary.json is. A level file written before
verdicts existed has no `limiter`: `verdict_of` judges it when it is read, with what the file
holds (no plan, no topology), so old runs still compare.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines.layout import EngineFlags, flag_values, layout, positive_int
from orchestrator.limits.advice import Suggestion, advice
from orchestrator.limits.evidence import PlanFacts, gather, previous
from orchestrator.limits.rules import KNEE_THRESHOLD, Knee, Verdict, knee, limiter
from orchestrator.limits.topology import TopologyError, layout_links, parse_topology
from orchestrator.runs.run_records import LevelResult


def plan_facts(args: Mapping[str, object], extra_args: Sequence[str] = (),
               topology: str | None = None, gpus: int | None = None, *,
               flags: EngineFlags) -> PlanFacts:
    """What the plan's `service.args` (in its engine's `flags`) and the host's facts (its
    `nvidia-smi topo -m` text, its GPU count) tell the rules. A topology that does not parse
    is left out, not guessed."""
    links = None
    if topology:
        try:
            links = layout_links(parse_topology(topology), layout(args, extra_args, flags))
        except TopologyError:
            links = None
    cap, budget = flags.scheduler_cap, flags.batch_tokens
    counts = flag_values(args, extra_args, [n for n in (cap, budget) if n], flags.aliases)
    return PlanFacts(max_num_seqs=positive_int(counts.get(cap or "")),
                     max_num_batched_tokens=positive_int(counts.get(budget or "")),
                     links=links, gpus=gpus, flags=flags)


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """A level file's `limiter` block."""
    return {"name": verdict.name, "confidence": verdict.confidence, "why": verdict.why,
            "figures": dict(verdict.figures)}


def _from_json(block: Mapping[str, Any]) -> Verdict | None:
    name, confidence, why = block.get("name"), block.get("confidence"), block.get("why")
    if not isinstance(name, str) or confidence not in ("high", "medium", "low") or not isinstance(why, str):
        return None
    figures = block.get("figures")
    kept = {k: v for k, v in figures.items() if isinstance(v, int | float | str | bool)} \
        if isinstance(figures, Mapping) else {}
    return Verdict(name, confidence, why, kept)


def verdict_of(level: LevelResult, facts: PlanFacts | None = None,
               before: LevelResult | None = None) -> Verdict:
    """The level's recorded verdict; for a level file without one (an older orch), judged now
    from what the file holds (and the level `before` it)."""
    recorded = _from_json(level.limiter) if isinstance(level.limiter, Mapping) else None
    return recorded if recorded is not None else limiter(gather(level, facts, before))


@dataclass(frozen=True)
class Plateau:
    """Where a sweep stops rising and why, and what to try."""

    knee: Knee
    suggestions: list[Suggestion] = field(default_factory=list)
    note: str = ""

    @property
    def says(self) -> str:
        """`interconnect-bound from C=64` / `still rising, compute-bound at C=256`."""
        return self.knee.describe()

    @property
    def verdict(self) -> Verdict | None:
        return self.knee.verdict

    def evidence(self) -> str:
        """The deciding figures of the verdict at the knee, in words and numbers."""
        verdict = self.verdict
        if verdict is None:
            return ""
        return f"{verdict.why} ({verdict.confidence} confidence)"

    def to_json(self) -> dict[str, Any]:
        verdict = self.verdict
        return {
            "says": self.says,
            "knee": self.knee.at,
            "knee_how": self.knee.how,
            "limiter": verdict_json(verdict) if verdict else None,
            "levels": {f"c{c}": v.name for c, v in self.knee.after},
            "try": [{"title": s.title, "matrix": s.matrix, "set": s.as_set()} for s in self.suggestions],
            "note": self.note,
        }


def plateau(levels: Sequence[LevelResult], args: Mapping[str, object] | None = None,
            extra_args: Sequence[str] = (), facts: PlanFacts | None = None,
            threshold: float = KNEE_THRESHOLD, known: tuple[int | None, str] | None = None) -> Plateau:
    """The sweep's plateau: the knee (`known`: as a report already found it) with the verdict
    of each level from it on, and the advice for the verdict at the knee."""
    found = knee(levels, facts, threshold, known=known,
                 judge=lambda lv: verdict_of(lv, facts, previous(lv, levels)))
    if found.verdict is None:
        return Plateau(found)
    suggestions, note = advice(found.verdict, args or {}, tuple(extra_args),
                               flags=facts.flags if facts else None)
    return Plateau(found, suggestions, note)


@dataclass(frozen=True)
class Judge:
    """The sweep's judge (bench/judge.py): a verdict for each level, a plateau for the sweep."""

    facts: PlanFacts = field(default_factory=PlanFacts)
    args: Mapping[str, object] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    threshold: float = KNEE_THRESHOLD

    def level(self, result: LevelResult, earlier: Sequence[LevelResult] = ()) -> dict[str, Any]:
        return verdict_json(limiter(gather(result, self.facts, previous(result, earlier))))

    def sweep(self, results: Sequence[LevelResult], knee: int | None) -> dict[str, Any]:
        known = (knee, "found by the auto sweep") if knee is not None else None
        return plateau(results, self.args, self.extra_args, self.facts, self.threshold,
                       known).to_json()


def plateau_lines(block: Mapping[str, Any], plan_ref: str = "PLAN") -> list[str]:
    """A summary's `plateau` block in words, for under the sweep's table: where and why, the
    deciding figures, and each suggestion as the `orch plan` command that previews it."""
    limiter_block = block.get("limiter")
    if not isinstance(limiter_block, Mapping):
        return [f"Why it plateaus: {block.get('says') or 'too few levels to say'}"]
    confidence = limiter_block.get("confidence", "?")
    lines = [f"Why it plateaus: {block.get('says')} ({confidence} confidence)",
             f"  {limiter_block.get('why', '')}"]
    for suggestion in block.get("try") or []:
        if isinstance(suggestion, Mapping):
            lines.append(f"  try: {suggestion.get('title')}")
            lines.append(f"       orch plan {shlex.quote(plan_ref)} --set {shlex.quote(str(suggestion.get('set')))}")
    if block.get("note"):
        lines.append(f"  {block['note']}")
    return lines
