"""The GPU layout of a server, read once from its flags: vLLM's parallelism flags (which the
simulator speaks too), in `service.args` (long or underscore spelling) or `service.extra_args`
(`--tensor-parallel-size 8`, `--tensor-parallel-size=8`, `-tp 8`). Preflight counts the GPUs a
host needs from it, the multi-node topology splits it over the nodes, the report divides
throughput by it: one reading, so they cannot disagree.

Expert parallelism and decode context parallelism reuse the same GPUs, so they add none.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.names import flag_name

# Long flag -> the label the report shows.
FLAGS = {
    "tensor-parallel-size": "TP",
    "pipeline-parallel-size": "PP",
    "data-parallel-size": "DP",
    "data-parallel-size-local": "DP local",
    "nnodes": "nodes",
}
SHORT = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size",
         "-dp": "data-parallel-size", "-dpl": "data-parallel-size-local"}


@dataclass(frozen=True)
class Layout:
    sizes: dict[str, int]  # the flags that are set: long name -> size
    invalid: dict[str, object] = field(default_factory=dict)  # flag -> a value that is no size

    def size(self, flag: str) -> int:
        return self.sizes.get(flag, 1)

    @property
    def tensor(self) -> int:
        return self.size("tensor-parallel-size")

    @property
    def pipeline(self) -> int:
        return self.size("pipeline-parallel-size")

    @property
    def data(self) -> int:
        return self.size("data-parallel-size")

    @property
    def world_size(self) -> int:
        """GPUs of one model replica: tensor x pipeline."""
        return self.tensor * self.pipeline

    @property
    def total_gpus(self) -> int:
        """GPUs of the whole server: tensor x pipeline x data parallel."""
        return self.world_size * self.data

    @property
    def gpus_per_host(self) -> int:
        """GPUs one host needs: a replica split over `--nnodes`, times the local replicas."""
        nodes = self.size("nnodes")
        local = self.sizes.get("data-parallel-size-local", self.data)
        return max(1, -(-self.world_size // nodes)) * local

    def describe(self) -> str:
        """"TP 8 x DP 2", from the flags that multiply (empty when none is set)."""
        shown = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")
        return " x ".join(f"{FLAGS[f]} {self.sizes[f]}" for f in shown if f in self.sizes)


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


def flag_values(args: Mapping[str, object], extra_args: Sequence[str],
                flags: Collection[str]) -> dict[str, object]:
    """The raw values of `flags` that `service.args` and `service.extra_args` pass (`--flag N`,
    `--flag=N`, vLLM's short forms; extra_args win, as the later flag wins in vLLM's parser)."""
    found: dict[str, object] = {}
    for key, value in args.items():
        flag = flag_name(key)
        if flag in flags:
            found[flag] = value
    for index, token in enumerate(extra_args):
        name, eq, inline = token.partition("=")
        flag = SHORT.get(name) or (name[2:] if name.startswith("--") else "")
        if flag in flags:
            found[flag] = inline if eq else (extra_args[index + 1] if index + 1 < len(extra_args) else None)
    return found


def layout(args: Mapping[str, object], extra_args: Sequence[str] = ()) -> Layout:
    """The layout `service.args` and `service.extra_args` ask for (extra_args win)."""
    sizes: dict[str, int] = {}
    invalid: dict[str, object] = {}
    for flag, raw in flag_values(args, extra_args, FLAGS).items():
        number = positive_int(raw)
        if number is None:
            invalid[flag] = raw
        else:
            sizes[flag] = number
    return Layout(sizes, invalid)
