"""`--slo 'p99_ttft<=2s,p99_tpot<=60ms'` and `--objective output_throughput`, read once (pure).

    SLO    := TERM ("," TERM)*
    TERM   := STAT "_" METRIC OP NUMBER UNIT      p99_ttft<=2s, mean_tpot<60ms, p50_itl<=30ms
    STAT   := mean | median | pNN                 (p50, p99, p99.9)
    METRIC := a latency of orch's metric table    ttft, tpot, itl, e2el, ...
    OP     := <= | <
    UNIT   := s | ms

Each term is a `Condition` of the matrix objective (plan/models/objective.py), so a level's figure
is read and held to it the same way. The objective is a throughput of the metric table
(`output_throughput`, `request_throughput`, ...): what the tune maximises at a level meeting
every term.
"""

from __future__ import annotations

import re

from orchestrator.metrics import LATENCIES, METRICS
from orchestrator.plan.models.objective import Condition

EXAMPLE = "p99_ttft<=2s,p99_tpot<=60ms"
DEFAULT_OBJECTIVE = "output_throughput"
_TERM = re.compile(r"^(?P<stat>mean|median|p\d+(?:\.\d+)?)_(?P<metric>[a-z_0-9]+?)\s*"
                   r"(?P<op><=|<|>=|>|==|=)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>[a-z]*)$")
_LATENCY = {m.name for m in LATENCIES}
THROUGHPUTS = tuple(m.name for m in METRICS if m.kind == "throughput")


class SloError(ValueError):
    """What is wrong with an SLO or objective text (the message names the term)."""


def parse_slo(text: str) -> tuple[Condition, ...]:
    """`p99_ttft<=2s,p99_tpot<=60ms` -> its conditions; an SloError names the bad term."""
    terms = [t.strip() for t in text.split(",")]
    if not text.strip() or not all(terms):
        raise SloError(f"{text!r}: expected terms separated by commas, such as `{EXAMPLE}`")
    out: list[Condition] = []
    for term in terms:
        out.append(_term(term.lower()))
    keys = [c.key for c in out]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise SloError(f"{text!r}: {twice[0].removesuffix('_ms')} is limited twice; give it once")
    return tuple(out)


def _term(term: str) -> Condition:
    found = _TERM.match(term)
    if found is None:
        raise SloError(f"cannot read {term!r}: expected STAT_METRIC<=LIMIT with a unit, such as "
                       "`p99_ttft<=2s` or `mean_tpot<60ms`")
    metric = found["metric"]
    if metric not in _LATENCY:
        raise SloError(f"{term!r}: unknown metric {metric!r}; one of {', '.join(sorted(_LATENCY))}")
    if found["op"] not in ("<=", "<"):
        raise SloError(f"{term!r}: an SLO is an upper limit on a latency: use <= or <, "
                       f"not {found['op']}")
    unit = found["unit"]
    if unit not in ("s", "ms"):
        raise SloError(f"{term!r}: " + (f"unknown unit {unit!r}" if unit else "no unit")
                       + "; give s or ms (2s, 60ms)")
    stat = found["stat"]
    if stat.startswith("p") and not 0 < float(stat[1:]) <= 100:
        raise SloError(f"{term!r}: percentile {stat[1:]} is not between 0 and 100")
    value = float(found["value"]) * (1000.0 if unit == "s" else 1.0)
    return Condition(stat, metric, found["op"], value)


def parse_objective_metric(text: str) -> str:
    """`output_throughput` (a throughput of the metric table) -> itself; else an SloError."""
    name = text.strip().lower()
    if name not in THROUGHPUTS:
        raise SloError(f"unknown objective {text!r}: a throughput to maximise, one of "
                       f"{', '.join(THROUGHPUTS)}")
    return name


def describe(conditions: tuple[Condition, ...]) -> str:
    """`p99_ttft<=2s,p99_tpot<=60ms`: as the grammar writes it."""
    return ",".join(f"{c.stat}_{c.metric}{c.op}{_limit(c.limit_ms)}" for c in conditions)


def _limit(ms: float) -> str:
    return f"{ms / 1000:g}s" if ms >= 1000 and ms % 100 == 0 else f"{ms:g}ms"
