"""What to try, in plan terms (pure): a limiter and the plan's `service.args` -> `Suggestion`s,
each a `matrix:` the user can paste into the plan (or give as `--set 'matrix=<json>'`), whose
variants orch then applies and compares. Every flag is the engine's own (`Engine.flags`,
engines/layout.py: vLLM's names below, SGLang's in brackets); a knob the engine has no flag
for is said in words, with no matrix.

    client-bound            no server change: run the client elsewhere, fewer or lower levels
    scheduler-cap           max-num-seqs [max-running-requests]: [current x 2, current x 4]
                            (and max-num-batched-tokens [chunked-prefill-size] x 2 when set)
    kv-cache-bound          kv-cache-dtype: [fp8] ([fp8_e4m3]) unless it is fp8 already;
                            max-model-len [context-length] halved (or 32768 when unset)
    host-cpu-bound          api-server-count: [2, 4] [none: said in words]
    interconnect-bound      tensor-parallel-size [tp-size] halved with data-parallel-size
                            [dp-size] doubled (same GPUs, half the all-reduce span); expert
                            parallelism (enable-expert-parallel: [true], [ep-size: TP]) on a
                            model on 2 GPUs or more, not already expert parallel
    compute-bound           data-parallel-size [dp-size] doubled (twice the GPUs)
    memory-bandwidth-bound  kv-cache-dtype: [fp8] (fewer bytes read per token)
    not-enough-evidence     nothing to change: collect the missing figures first
    unbalanced              router.policy: a load-aware one (power_of_two, else cache_aware)
    slow-replica            no plan change: the replica named is slow (its host, its GPUs)
    router-bound            no server change: the router on a host of its own (router.on)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines.layout import EngineFlags, Layout, flag_values, layout, switched_on
from orchestrator.limits.rules import Verdict

ARGS = "service.args."
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


def _arg(args: Mapping[str, object], flag: str, flags: EngineFlags) -> object:
    return flag_values(args, (), [flag], flags.aliases).get(flag)


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _lacks(what: str) -> Suggestion:
    """A knob the engine has no flag for: said, with no plan change to try."""
    return Suggestion(f"{what}: the engine has no flag for it, so there is no plan change to try")


def _scheduler(args: Mapping[str, object], verdict: Verdict, _: Layout, flags: EngineFlags) -> list[Suggestion]:
    cap = flags.scheduler_cap
    if cap is None:
        return [_lacks("run more sequences at once")]
    # the cap as the verdict names it (the engine's flag; `max_num_seqs` in an older verdict)
    seen = verdict.figures.get(cap) or verdict.figures.get("max_num_seqs") or verdict.figures.get("max_running")
    current = _int(_arg(args, cap, flags)) or (int(seen) if isinstance(seen, int | float) else None)
    current = current or flags.scheduler_default
    if current is None:
        return [Suggestion(f"run more sequences at once: raise {cap} above what ran")]
    out = [Suggestion(f"run more sequences at once than {current}", {ARGS + cap: [current * 2, current * 4]})]
    tokens = _int(_arg(args, flags.batch_tokens, flags)) if flags.batch_tokens else None
    if tokens and flags.batch_tokens:
        out.append(Suggestion(f"schedule more tokens per step than {tokens}",
                              {ARGS + flags.batch_tokens: [tokens * 2]}))
    return out


def _kv_dtype(args: Mapping[str, object], flags: EngineFlags) -> Suggestion | None:
    """Half the KV cache's bytes per token (None: its cache is fp8 already)."""
    name = flags.kv_dtype
    if name is None:
        return _lacks("halve the KV cache's bytes per token")
    if str(_arg(args, name, flags) or "auto").lower() in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return None
    return Suggestion("halve the KV cache's bytes per token", {ARGS + name: [flags.kv_fp8]})


def _kv(args: Mapping[str, object], _: Verdict, __: Layout, flags: EngineFlags) -> list[Suggestion]:
    dtype = _kv_dtype(args, flags)
    out = [dtype] if dtype else []
    name = flags.context_length
    if name is None:
        return [*out, _lacks("a shorter context leaves room for more sequences")]
    length = _int(_arg(args, name, flags))
    shorter = length // 2 if length else FALLBACK_MODEL_LEN
    out.append(Suggestion(f"a shorter context, {shorter} tokens, leaves room for more sequences",
                          {ARGS + name: [shorter]}))
    return out


def _host_cpu(_: Mapping[str, object], __: Verdict, ___: Layout, flags: EngineFlags) -> list[Suggestion]:
    if flags.api_servers is None:
        return [_lacks("more API server processes to tokenize and stream")]
    return [Suggestion("more API server processes to tokenize and stream",
                       {ARGS + flags.api_servers: [2, 4]})]


def _expert(args: Mapping[str, object], shape: Layout, flags: EngineFlags) -> list[Suggestion]:
    """Expert parallelism on a model over 2 GPUs or more that is not expert parallel yet."""
    if shape.world_size < 2 or shape.expert > 1:
        return []
    title = "expert parallelism (a mixture-of-experts model): experts stay put, tokens move"
    if flags.expert_switch:
        on = switched_on(_arg(args, flags.expert_switch, flags))
        return [] if on else [Suggestion(title, {ARGS + flags.expert_switch: [True]})]
    if flags.expert:
        return [Suggestion(title, {ARGS + flags.expert: [shape.tensor]})]
    return [_lacks(title)]


def _interconnect(args: Mapping[str, object], _: Verdict, shape: Layout, flags: EngineFlags) -> list[Suggestion]:
    out = []
    if shape.tensor >= 2 and shape.tensor % 2 == 0:
        tp, dp = shape.tensor // 2, shape.data * 2
        title = f"TP{tp} x DP{dp} on the same GPUs: each all-reduce spans half of them"
        if flags.tensor and flags.data:
            out.append(Suggestion(title, {ARGS + flags.tensor: [tp], ARGS + flags.data: [dp]}))
        else:
            out.append(_lacks(title))
    return out + _expert(args, shape, flags)


def _compute(_: Mapping[str, object], __: Verdict, shape: Layout, flags: EngineFlags) -> list[Suggestion]:
    title = f"another replica, data parallel {shape.data * 2} (needs {shape.total_gpus * 2} GPUs)"
    if flags.data is None:
        return [_lacks(title)]
    return [Suggestion(f"another replica: {flags.data} {shape.data * 2} (needs "
                       f"{shape.total_gpus * 2} GPUs)", {ARGS + flags.data: [shape.data * 2]})]


def _memory(args: Mapping[str, object], _: Verdict, __: Layout, flags: EngineFlags) -> list[Suggestion]:
    dtype = _kv_dtype(args, flags)
    return [dtype] if dtype else []


NOTES = {
    "client-bound": "no server change: run orch bench from a machine of its own (orch bench --url), "
                    "split the load across client processes on free cores (bench.client_processes, "
                    "--client-processes N), or sweep fewer, lower levels; then measure again",
    "not-enough-evidence": "nothing to change yet: collect what the verdict lists as missing, and sweep "
                           "past the plateau",
}
Make = Callable[[Mapping[str, object], Verdict, Layout, EngineFlags], list[Suggestion]]
_BY_NAME: dict[str, Make] = {"scheduler-cap": _scheduler, "kv-cache-bound": _kv, "host-cpu-bound": _host_cpu,
            "interconnect-bound": _interconnect, "compute-bound": _compute,
            "memory-bandwidth-bound": _memory}


LOAD_AWARE = ("power_of_two", "cache_aware")
FLEET_NOTES = {
    "slow-replica": "no plan change: look at the replica named (its host's other load, its GPUs' "
                    "clocks and throttling) before the policy; a load-aware router.policy sends it less",
    "router-bound": "no server change: give the router a host of its own (router.on: <host>) or "
                    "more CPU; the replicas were waiting for it",
}


def _fleet(verdict: Verdict) -> tuple[list[Suggestion], str] | None:
    """A fleet verdict's advice (the router's, not the engine's: no flags needed)."""
    if verdict.name == "unbalanced":
        current = verdict.figures.get("policy")
        policies = [p for p in LOAD_AWARE if p != current]
        return [Suggestion(f"route by load, not in turn: router.policy {policies[0]}",
                           {"router.policy": policies})], ""
    if verdict.name in FLEET_NOTES:
        return [], FLEET_NOTES[verdict.name]
    return None


UNKNOWN_ENGINE = ("no plan, so no engine whose flags to name (a server benchmarked by URL): "
                  "the verdict's figures say what held it")


def advice(verdict: Verdict, args: Mapping[str, object] | None = None,
           extra_args: tuple[str, ...] = (), *, flags: EngineFlags | None) -> tuple[list[Suggestion], str]:
    """The suggestions for a verdict on a plan with these `service.args` (and extra_args), in
    its engine's `flags`, and a note (why none, or what else to do). A client-bound level
    never gets a server change; without a plan (`flags` None) no flag is guessed."""
    fleet = _fleet(verdict)
    if fleet is not None:
        return fleet
    if flags is None:
        return [], NOTES.get(verdict.name, UNKNOWN_ENGINE if verdict.name in _BY_NAME else "")
    args = args or {}
    make = _BY_NAME.get(verdict.name)
    suggestions = make(args, verdict, layout(args, extra_args, flags), flags) if make else []
    return suggestions, NOTES.get(verdict.name, "")
