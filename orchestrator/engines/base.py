"""What orch must know of a model server engine, in one small interface.

An engine is a value (`Engine`), not a class hierarchy: its launch, the flags a plan may not
set through `service.args` (they have their own fields), how it is stopped, whether it runs
on GPUs, whether the probe reads an installed vLLM for it, and what its log says (crash
signatures; start-up phases and kernels are read from vLLM's lines, which the simulator
prints too: engines/vllm_phases.py, engines/vllm_kernels.py). One module per engine
(`engines/vllm.py`, `engines/sim.py`) builds one; `engines/__init__.py` is the registry the
plan's `engine:` choices come from. Nothing outside the engine modules asks `engine == ...`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.engines.signatures import Signature

StopSignal = Literal["SIGINT", "SIGTERM"]
# (model, venv bin directory, the plan's pins: canonical name -> version) -> argv
LaunchArgv = Callable[[str, str, Mapping[str, str]], list[str]]


@dataclass(frozen=True)
class Engine:
    name: str
    summary: str  # one line, for the plan reference
    launch_argv: LaunchArgv
    reserved_flags: Mapping[str, str] = field(default_factory=dict)  # flag -> its plan field
    api_key_env: str = "VLLM_API_KEY"
    stop_signal: StopSignal = "SIGINT"
    simulated: bool = False
    uses_gpus: bool = True  # preflight counts GPUs; a multi-node gate checks them
    reads_vllm: bool = True  # the probe reads the installed vLLM (version, names, flags)
    # what its log says: why the server died (engines/signatures.py); its start-up phases
    # are read by engines/vllm_phases.py's tracker, whose lines the simulator prints too
    signatures: Sequence[Signature] = ()
