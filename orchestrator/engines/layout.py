"""An engine's flag vocabulary (`EngineFlags`: the names it gives its parallel sizes and its
tuning knobs, declared by each engine on its `Engine` value) and the GPU layout read with it
(`layout`), from `service.args` (long or underscore spelling) or `service.extra_args`
(`--tp-size 8`, `--tp-size=8`, another spelling the engine declares). Preflight counts the GPUs
a host needs from it, the multi-node topology splits it over the nodes, the report divides
throughput by it, the limiter advises in the engine's own names: one reading, so they cannot
disagree, and no caller interprets an engine's flags itself.

Expert parallelism and decode context parallelism reuse the same GPUs, so they add none.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.names import flag_name

# The axes of a layout, engine-neutral, and the label the report shows for each.
LABELS = {"tensor": "TP", "pipeline": "PP", "data": "DP", "data_local": "DP local",
          "nodes": "nodes", "expert": "EP"}
AXES = tuple(LABELS)


@dataclass(frozen=True)
class EngineFlags:
    """The long names (no dashes) an engine gives what shared code reads or advises; None:
    the engine has no such flag (the advice then says so in words)."""

    tensor: str | None = None  # tensor parallel size
    pipeline: str | None = None
    data: str | None = None  # data parallel replicas
    data_local: str | None = None  # the replicas on one node
    nodes: str | None = None  # nodes one server spans
    expert: str | None = None  # expert parallel size (on the tensor/data GPUs)
    expert_switch: str | None = None  # a switch for expert parallelism over TP x DP GPUs
    data_in_tensor: str | None = None  # a switch making data parallel ranks share the TP GPUs
    # Other spellings, as a command line writes them ("-tp", "--tensor-parallel-size"): the long name.
    aliases: Mapping[str, str] = field(default_factory=dict)
    scheduler_cap: str | None = None  # the most requests running at once
    scheduler_default: int | None = None  # its value when the plan sets none (None: sized at start)
    batch_tokens: str | None = None  # the tokens one scheduler step may take
    kv_dtype: str | None = None  # the KV cache's element type
    kv_fp8: str = "fp8"  # the value of it that halves a 16-bit cache
    context_length: str | None = None  # the longest sequence it admits
    api_servers: str | None = None  # processes serving the HTTP API
    also_parallel: tuple[str, ...] = ()  # flags that shape parallelism but add no GPUs

    def axis(self, name: str) -> str | None:
        """The engine's flag for a layout axis (`tensor`, ...), or None."""
        value = getattr(self, name)
        return value if isinstance(value, str) else None

    def parallel(self) -> frozenset[str]:
        """Every flag of its that shapes the layout, by any spelling (the plan diff groups them)."""
        named = {n for n in [self.axis(a) for a in AXES] + [self.expert_switch, self.data_in_tensor] if n}
        spelled = {other.lstrip("-") for other, name in self.aliases.items() if name in named}
        return frozenset(named | spelled | set(self.also_parallel))


@dataclass(frozen=True)
class Layout:
    sizes: dict[str, int]  # the axes the flags set: axis (`tensor`, ...) -> size
    invalid: dict[str, object] = field(default_factory=dict)  # the engine's flag -> no size
    data_shares_gpus: bool = False  # data parallel ranks run on the tensor parallel GPUs
    expert_switched: bool = False  # a switch spreads the experts over the TP x DP GPUs

    def size(self, axis: str) -> int:
        return self.sizes.get(axis, 1)

    @property
    def tensor(self) -> int:
        return self.size("tensor")

    @property
    def pipeline(self) -> int:
        return self.size("pipeline")

    @property
    def data(self) -> int:
        return self.size("data")

    @property
    def expert(self) -> int:
        """Expert parallel size: the engine's own, or TP x DP when its switch is on."""
        if "expert" in self.sizes or not self.expert_switched:
            return self.size("expert")
        return self.tensor * (1 if self.data_shares_gpus else self.data)

    @property
    def world_size(self) -> int:
        """GPUs of one model replica: tensor x pipeline."""
        return self.tensor * self.pipeline

    @property
    def total_gpus(self) -> int:
        """GPUs of the whole server: tensor x pipeline x data parallel."""
        return self.world_size * (1 if self.data_shares_gpus else self.data)

    @property
    def gpus_per_host(self) -> int:
        """GPUs one host needs: a replica split over the nodes, times the local replicas."""
        local = 1 if self.data_shares_gpus else self.sizes.get("data_local", self.data)
        return max(1, -(-self.world_size // self.size("nodes"))) * local

    def describe(self) -> str:
        """"TP 8 x DP 2", from the axes that multiply (empty when none is set), then an
        expert parallel size the flags set ("TP 8, EP 8")."""
        shown = " x ".join(f"{LABELS[a]} {self.sizes[a]}" for a in ("tensor", "pipeline", "data")
                           if a in self.sizes)
        if "expert" in self.sizes:
            return f"{shown}, EP {self.expert}" if shown else f"EP {self.expert}"
        return shown


def positive_int(value: object) -> int | None:
    """A count as a plan gives it (an int, or digits in a string); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
        return number if number >= 1 else None
    return None


def switched_on(value: object) -> bool:
    """A switch as a plan gives it (`true`, or an extra_args flag without a value)."""
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", ""))


def flag_values(args: Mapping[str, object], extra_args: Sequence[str],
                flags: Collection[str], aliases: Mapping[str, str] | None = None) -> dict[str, object]:
    """The raw values of `flags` that `service.args` and `service.extra_args` pass (`--flag N`,
    `--flag=N`, the engine's `aliases`; extra_args win, as the later flag wins in a parser).
    A bare switch in extra_args (no value after it) reads as an empty string."""
    other = aliases or {}
    found: dict[str, object] = {}
    for key, value in args.items():
        flag = other.get("--" + flag_name(key), flag_name(key))
        if flag in flags:
            found[flag] = value
    for index, token in enumerate(extra_args):
        name, eq, inline = token.partition("=")
        flag = other.get(name) or (name[2:] if name.startswith("--") else "")
        if flag not in flags:
            continue
        following = extra_args[index + 1] if index + 1 < len(extra_args) else ""
        found[flag] = inline if eq else ("" if following.startswith("-") else following)
    return found


def layout(args: Mapping[str, object], extra_args: Sequence[str], flags: EngineFlags) -> Layout:
    """The layout `service.args` and `service.extra_args` ask for, read in the engine's names."""
    axes = {name: a for a in AXES if (name := flags.axis(a))}
    switches = [s for s in (flags.expert_switch, flags.data_in_tensor) if s]
    raw = flag_values(args, extra_args, [*axes, *switches], flags.aliases)
    sizes: dict[str, int] = {}
    invalid: dict[str, object] = {}
    for flag, axis in axes.items():
        if flag in raw:
            number = positive_int(raw[flag])
            if number is None:
                invalid[flag] = raw[flag]
            else:
                sizes[axis] = number
    shares = bool(flags.data_in_tensor) and switched_on(raw.get(flags.data_in_tensor or ""))
    switched = bool(flags.expert_switch) and switched_on(raw.get(flags.expert_switch or ""))
    return Layout(sizes, invalid, shares, switched)
