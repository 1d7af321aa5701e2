"""What to try, in plan terms (pure): a limiter and the plan's `service.args` -> `Suggestion`s,
each a `matrix:` the user can paste into the plan (or give as `--set 'matrix=<json>'`), whose
variants orch then applies and compares.

    client-bound            no server change: run the client elsewhere, fewer or lower levels
    scheduler-cap           max-num-seqs: [current x 2, current x 4]
                            (and max-num-batched-tokens x 2 when the plan sets it)
    kv-cache-bound          kv-cache-dtype: [fp8] (unless it is fp8 already); max-model-len
                            halved (or 32768 when the plan does not set it)
    host-cpu-bound          api-server-count: [2, 4]
    interconnect-bound      tensor-parallel-size halved with data-parallel-size doubled (same
                            GPUs, half the all-reduce span); enable-expert-parallel: [true]
                            (a model on 2 GPUs or more, not already expert parallel)
    compute-bound           data-parallel-size doubled (twice the GPUs)
    memory-bandwidth-bound  kv-cache-dtype: [fp8] (fewer bytes read per token)
    not-enough-evidence     nothing to change: collect the missing figures first
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines.layout import Layout, layout
from orchestrator.limits.rules import Verdict
from orchestrator.names import flag_name

ARGS = "service.args."
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default for an API server on a GPU (when the plan sets none)
FALLBACK_MODEL_LEN = 32768


@dataclass(frozen=True)
class Suggestion:
    title: str
    matrix: dict[str, list[Any]] = field(default_factory=dict)  # axis -> values; empty: no plan change

    def as_set(self) -> str:
        """`matrix={...}` for `--set`."""
        return "matrix=" + json.dumps(self.matrix, separators=(",", ":"))

    def as_yaml(self) -> str:
        """The `matrix:` block to paste into the plan."""
        lines = ["matrix:"]
        lines += [f"  {axis}: {json.dumps(values)}" for axis, values in self.matrix.items()]
        return "\n".join(lines)


def _arg(args: Mapping[str, object], flag: str) -> object:
    return next((value for key, value in args.items() if flag_name(key) == flag), None)


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _scheduler(args: Mapping[str, object], verdict: Verdict, _: Layout) -> list[Suggestion]:
    seen = verdict.figures.get("max_num_seqs") or verdict.figures.get("max_running")
    current = _int(_arg(args, "max-num-seqs")) or (int(seen) if isinstance(seen, int | float) else None)
    current = current or DEFAULT_MAX_NUM_SEQS
    out = [Suggestion(f"run more sequences at once than {current}",
                      {ARGS + "max-num-seqs": [current * 2, current * 4]})]
    tokens = _int(_arg(args, "max-num-batched-tokens"))
    if tokens:
        out.append(Suggestion(f"schedule more tokens per step than {tokens}",
                              {ARGS + "max-num-batched-tokens": [tokens * 2]}))
    return out


def _kv(args: Mapping[str, object], _: Verdict, __: Layout) -> list[Suggestion]:
    out = []
    if str(_arg(args, "kv-cache-dtype") or "auto").lower() not in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        out.append(Suggestion("halve the KV cache's bytes per token", {ARGS + "kv-cache-dtype": ["fp8"]}))
    length = _int(_arg(args, "max-model-len"))
    shorter = length // 2 if length else FALLBACK_MODEL_LEN
    out.append(Suggestion(f"a shorter context, {shorter} tokens, leaves room for more sequences",
                          {ARGS + "max-model-len": [shorter]}))
    return out


def _host_cpu(_: Mapping[str, object], __: Verdict, ___: Layout) -> list[Suggestion]:
    return [Suggestion("more API server processes to tokenize and stream",
                       {ARGS + "api-server-count": [2, 4]})]


def _interconnect(args: Mapping[str, object], _: Verdict, shape: Layout) -> list[Suggestion]:
    out = []
    if shape.tensor >= 2 and shape.tensor % 2 == 0:
        tp, dp = shape.tensor // 2, shape.data * 2
        out.append(Suggestion(f"TP{tp} x DP{dp} on the same GPUs: each all-reduce spans half of them",
                              {ARGS + "tensor-parallel-size": [tp], ARGS + "data-parallel-size": [dp]}))
    if shape.world_size >= 2 and _arg(args, "enable-expert-parallel") not in (True, "true", "True"):
        out.append(Suggestion("expert parallelism (a mixture-of-experts model): experts stay put, "
                              "tokens move", {ARGS + "enable-expert-parallel": [True]}))
    return out


def _compute(_: Mapping[str, object], __: Verdict, shape: Layout) -> list[Suggestion]:
    return [Suggestion(f"another replica: data-parallel-size {shape.data * 2} (needs "
                       f"{shape.total_gpus * 2} GPUs)", {ARGS + "data-parallel-size": [shape.data * 2]})]


def _memory(args: Mapping[str, object], verdict: Verdict, shape: Layout) -> list[Suggestion]:
    return [s for s in _kv(args, verdict, shape) if ARGS + "kv-cache-dtype" in s.matrix]


NOTES = {
    "client-bound": "no server change: run orch bench from a machine of its own (orch bench --url), "
                    "or sweep fewer, lower levels; then measure again",
    "not-enough-evidence": "nothing to change yet: collect what the verdict lists as missing, and sweep "
                           "past the plateau",
}
Make = Callable[[Mapping[str, object], Verdict, Layout], list[Suggestion]]
_BY_NAME: dict[str, Make] = {"scheduler-cap": _scheduler, "kv-cache-bound": _kv, "host-cpu-bound": _host_cpu,
            "interconnect-bound": _interconnect, "compute-bound": _compute,
            "memory-bandwidth-bound": _memory}


def advice(verdict: Verdict, args: Mapping[str, object] | None = None,
           extra_args: tuple[str, ...] = ()) -> tuple[list[Suggestion], str]:
    """The suggestions for a verdict on a plan with these `service.args` (and extra_args), and
    a note (why none, or what else to do). A client-bound level never gets a server change."""
    args = args or {}
    make = _BY_NAME.get(verdict.name)
    suggestions = make(args, verdict, layout(args, extra_args)) if make else []
    return suggestions, NOTES.get(verdict.name, "")
