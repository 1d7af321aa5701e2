"""What orch must know of a model server engine, in one small interface.

An engine is a value (`Engine`), not a class hierarchy: its launch, the flags a plan may not
set through `service.args` (they have their own fields), its API-key variable, how it is
stopped, whether it runs on GPUs, its flag vocabulary (`flags`: the names of its parallel sizes,
scheduler cap, batch budget, KV dtype, which shared code reads and advises in), what its log says (start-up phases and kernels, crash
signatures), the names of its /metrics, and its multi-node flags and node-address variable (`multi_node`), its environment report
(`env_collector`), its own rules: of the host before launch
(preflight) and of the plan alone (plan_check: vLLM's flags). One package per engine
(`engines/vllm/`, `engines/sim/`, ...) builds one as `ENGINE`; `engines/__init__.py` is the
registry the plan's `engine:` choices come from. Nothing outside `engines/` imports an
engine's package or asks `engine == ...`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from orchestrator.engines.compile_cache import CompileCache
from orchestrator.engines.layout import EngineFlags, Layout, layout
from orchestrator.engines.signatures import Signature

if TYPE_CHECKING:  # types only: the engines' packages sit above the plan and the facts
    from orchestrator.facts import Facts
    from orchestrator.plan.models import Plan, ServiceSpec
    from orchestrator.steps.base import Finding

StopSignal = Literal["SIGINT", "SIGTERM"]
# (model, venv bin directory, the plan's pins: canonical name -> version) -> argv
LaunchArgv = Callable[[str, str, Mapping[str, str]], list[str]]


class StartupStatus(Protocol):
    """Where a start-up is, for a live line and for the readiness wait."""

    @property
    def label(self) -> str: ...  # the phase in words ("loading weights")

    @property
    def progress(self) -> str | None: ...  # "3/119 shards (3%)"

    @property
    def total_s(self) -> float: ...  # since launch

    @property
    def api_up(self) -> bool: ...  # its HTTP API is listening (a silent one is hung)

    @property
    def ready(self) -> bool: ...


class StartupReader(Protocol):
    """Reads a server's log while it starts: its phases, and what it said of itself (`facts`:
    the kernels it chose, its KV cache size, ...)."""

    facts: dict[str, Any]

    @property
    def ready(self) -> bool: ...

    def feed_text(self, chunk: str, now: float) -> None: ...

    def feed(self, lines: Iterable[str], now: float) -> None: ...

    def current(self, now: float | None = None) -> StartupStatus | None: ...

    def summary(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class MetricNames:
    """The server's /metrics names for what a level samples: key -> the names that carry it,
    the first one present wins (an older release's name after the current one)."""

    prefix: str  # `vllm` for `vllm:...`: says whose counters a server exports
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # running, waiting, kv_cache_usage
    counters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # generation_tokens, ...


def no_preflight(plan: Plan, facts: Facts) -> list[Finding]:
    return []


@dataclass(frozen=True)
class FieldProblem:
    """A plan field the engine refuses before anything is installed (a flag its release
    lacks): an error at the field's file and line."""

    path: tuple[str | int, ...]  # ("service", "args", "tensor-paralel-size")
    message: str  # after the field's name
    hint: str | None = None


def no_plan_check(plan: Plan) -> list[FieldProblem]:
    return []


@dataclass(frozen=True)
class EnvCollector:
    """The engine's own report of the environment it runs in, kept with every run
    (apply/environment.py): `python -m MODULE` in the plan's venv, time-boxed."""

    module: str  # "vllm.collect_env"
    package: str  # what a venv without the module lacks, in words ("vLLM")
    label: str  # how the apply's line names it ("vllm collect-env")
    command: str  # how environment.json names it


@dataclass(frozen=True)
class MultiNode:
    """How one server of the engine spans nodes (`service.nodes`): the long names (no dashes)
    of the flags cluster/topology.py writes, and the variable it reads its node's own address
    from. Ray's own (`ray start`, RAY_ADDRESS) are Ray's, not the engine's."""

    executor: str  # chooses the workers' placement: `ray` or its own processes (`mp`)
    nodes: str  # how many nodes the group has
    rank: str  # this node's rank (0: the head)
    master_addr: str  # where the nodes meet: the head's address
    master_port: str
    headless: str | None  # the switch a worker node runs with (no API server); None: none
    host_ip_env: str | None  # the node's own address (placement, NCCL); None: it reads none


@dataclass(frozen=True)
class Engine:
    name: str
    summary: str  # one line, for the plan reference
    display: str  # what a person calls it in a sentence ("vLLM")
    launch_argv: LaunchArgv
    metrics: MetricNames
    startup: Callable[[float | None], StartupReader]  # a reader of one start-up's log
    reserved_flags: Mapping[str, str] = field(default_factory=dict)  # flag -> its plan field
    own_flags: Callable[[ServiceSpec], list[str]] | None = None  # from its own plan section
    # The variable it reads its API key from (never a command-line flag, visible to every
    # user of the host); None: it reads none, so a plan cannot give it a key.
    api_key_env: str | None = "VLLM_API_KEY"
    stop_signal: StopSignal = "SIGINT"
    simulated: bool = False  # runs from the orch wheel; its figures are model time
    uses_gpus: bool = True  # preflight counts GPUs; a multi-node gate checks them
    # The distributions (a regex of canonical names) whose installed package the probe reads
    # (version, parser names, flags); None: the probe reads none.
    builds: str | None = None
    signatures: Sequence[Signature] = ()  # why it died, from its log (engines/signatures.py)
    preflight: Callable[[Plan, Facts], list[Finding]] = no_preflight  # its own rules
    # Its rules of the plan alone, at plan time (`orch validate`, `orch plan`): its flags.
    plan_check: Callable[[Plan], list[FieldProblem]] = no_plan_check
    # A path on its server's own port that serves DCGM-exporter text for GPUs it stands in for
    # (the simulator's); read for the GPU telemetry when the host has no nvidia-smi.
    stand_in_dcgm: str | None = None
    # The names it gives its parallel sizes and tuning knobs (engines/layout.py); the layout,
    # the preflight's GPU count, the report's per-GPU figures and the advice read them.
    flags: EngineFlags = field(default_factory=EngineFlags)
    # How a server spans nodes; None: it cannot, and a plan with `service.nodes` is refused
    # at plan time.
    multi_node: MultiNode | None = None
    # Its report of its environment; None: it has none orch runs (the run says so).
    env_collector: EnvCollector | None = None
    # Where what its start-up compiles is kept between starts (engines/compile_cache.py);
    # None: it compiles nothing worth keeping.
    compile_cache: CompileCache | None = None

    def layout(self, args: Mapping[str, object], extra_args: Sequence[str] = ()) -> Layout:
        """The GPU layout its flags in `service.args` and `service.extra_args` ask for."""
        return layout(args, extra_args, self.flags)
