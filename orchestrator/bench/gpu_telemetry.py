"""What the host's GPUs did during each level: `GpuSampler`, the sweep's nvidia-smi sampler.

It samples on the host through its transport, with no agent installed: at each repeat's
start one long-lived command (`Transport.hold`) runs

    nvidia-smi --query-gpu=index,uuid,name,power.draw,... --format=csv,noheader,nounits -lms <interval>

and a thread of its own reads its lines, stamping each with the time since the repeat's
origin (perf_counter_ns, as the requests are); the repeat's stop ends it (closing the held
command's input ends the loop, over SSH as locally). One SSH channel per repeat, never one
command per sample. The lines are parsed only afterwards (gpu_figures.py): the level's
`gpu_telemetry` block has per GPU and in all the mean and peak power, utilization, peak
memory and temperature, mean and lowest SM clock, the energy in joules and a throttling
flag; `energy_figures(block, output_tokens, duration_s)` gives tokens per joule and per
second per watt. `snapshots()` is the raw time series of the last repeat (one `Snapshot`
per round of nvidia-smi, `gpu<index>.<figure>` values, then a `WindowEnd`).

Whether the host has an nvidia-smi that answers is asked once, when the sampler is made
(`command -v nvidia-smi && nvidia-smi -L`, one command): a host without one gets the block
`{"source": "none", "reason": "no nvidia-smi on the host"}` on every level, and nothing fails.
`interval` None (the plan's `bench.gpu_telemetry: null`) samples nothing: `gpu_telemetry: null`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from orchestrator.bench.gpu_figures import (
    EXIT_MARK,
    QUERY,
    WindowEnd,
    energy_figures,
    group_lines,
    level_energy,
    merge_summaries,
    summarize_samples,
    without_cut_round,
)
from orchestrator.bench.gpu_ranges import impossible_problem
from orchestrator.bench.samplers import Sampler, Snapshot
from orchestrator.errors import OrchError
from orchestrator.transport import Command
from orchestrator.transport.base import Held, Transport

__all__ = ["GpuSampler", "energy_figures", "probe_command", "sample_command"]

NOT_FOUND = 127
PROBE_TIMEOUT_S = 30.0  # nvidia-smi -L can take seconds on a host without persistence mode
MIN_INTERVAL_MS = 50
_POLL_S = 0.25
NO_NVIDIA_SMI = "no nvidia-smi on the host"


def probe_command() -> Command:
    """Exit 127 without an nvidia-smi on the PATH, else `nvidia-smi -L`'s answer."""
    return Command.script(f"command -v nvidia-smi >/dev/null 2>&1 || exit {NOT_FOUND}; nvidia-smi -L 2>&1")


def sample_command(interval_s: float) -> Command:
    """nvidia-smi in loop mode until the held command's input closes, then `EXIT_MARK <code>`.

    nvidia-smi does not read its input, so a watcher does: when the input closes (the
    sampler's stop, or the controller gone) it ends nvidia-smi, which the shell waits for
    and reports. If nvidia-smi ends first (a driver it cannot reach), its words and its exit
    code are the lines read."""
    ms = max(MIN_INTERVAL_MS, round(interval_s * 1000))
    query = ",".join(QUERY)
    return Command.script(
        "exec 3<&0; "
        f"nvidia-smi --query-gpu={query} --format=csv,noheader,nounits -lms {ms} 2>&1 3<&- & p=$!; "
        "{ cat <&3 >/dev/null 2>&1; kill $p 2>/dev/null; } >/dev/null 2>&1 & "
        f'wait $p; echo "{EXIT_MARK} $?"'
    )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class GpuSampler:
    """The nvidia-smi sampler of one host for a whole sweep (samplers.py's protocol).

    `transport` reaches the host whose GPUs serve; `interval` seconds between samples, None
    for none. Made with an interval, it asks the host once whether it has nvidia-smi (one
    command; `probe=False` defers that to the first start)."""

    block: ClassVar[str] = "gpu_telemetry"
    repeat_keys: ClassVar[tuple[str, ...]] = ("mean_power_w", "energy_j")

    def __init__(self, transport: Transport, interval: float | None, *, probe: bool = True) -> None:
        self.transport = transport
        self.interval = interval
        self.reason: str | None = None  # why the host gives no telemetry
        self.listed: list[str] = []  # nvidia-smi -L: `GPU 0: <name> (UUID: GPU-...)`
        self.gpus: dict[int, tuple[str, str]] = {}  # index -> (uuid, name), as sampled
        self.origin_ns = 0
        self._probed = False
        self._raw: list[tuple[float, str]] = []
        self._end_s: float | None = None
        self._problem = ""
        self._held: Held | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        if interval and probe:
            self.probe()

    @property
    def available(self) -> bool:
        return bool(self.interval) and self.probe()

    def probe(self) -> bool:
        """Whether the host has an nvidia-smi that answers `-L` (asked once; the answer, or
        why not, is kept: `listed`, `reason`)."""
        if self._probed:
            return self.reason is None
        self._probed = True
        try:
            result = self.transport.run(probe_command(), check=False, timeout=PROBE_TIMEOUT_S)
        except OrchError as error:
            self.reason = f"nvidia-smi did not answer: {_first_line(str(error))}"
            return False
        if result.returncode == NOT_FOUND and not result.stdout.strip():
            self.reason = NO_NVIDIA_SMI
        elif result.returncode != 0:
            said = _first_line(result.stdout) or _first_line(result.stderr)
            self.reason = f"nvidia-smi -L failed (exit {result.returncode}): {said}"
        else:
            self.listed = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        return self.reason is None

    # -- one repeat ---------------------------------------------------------------------

    def start(self, origin_ns: int) -> None:
        self.origin_ns, self._raw, self._end_s, self._problem = origin_ns, [], None, ""
        self._stop = threading.Event()
        if not self.available:
            return
        assert self.interval is not None
        try:
            held = self.transport.hold(sample_command(self.interval))
        except OrchError as error:
            self._problem = f"nvidia-smi did not start: {_first_line(str(error))}"
            return
        self._held = held
        self._thread = threading.Thread(target=self._read, args=(held, self._raw, self._stop),
                                        name="orch-gpu-telemetry", daemon=True)
        self._thread.start()

    def _read(self, held: Held, raw: list[tuple[float, str]], stop: threading.Event) -> None:
        while not stop.is_set():
            asked = time.monotonic()
            line = held.line(timeout=_POLL_S)
            if line is None:
                if time.monotonic() - asked < _POLL_S / 2:  # no line, and well before the timeout:
                    return  # the command ended
                continue
            raw.append(((time.perf_counter_ns() - self.origin_ns) / 1e9, line))

    def stop(self) -> None:
        self._end_s = (time.perf_counter_ns() - self.origin_ns) / 1e9
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._held is not None:
            self._held.release()
            self._held = None

    def snapshots(self) -> list[Snapshot]:
        """The last repeat's samples (one per round of nvidia-smi, up to the stop; a last
        round the stop cut short left out), then a `WindowEnd` at the stop; nothing when the
        host gives no telemetry."""
        if not self.available:
            return []
        end = self._end_s if self._end_s is not None else (
            self._raw[-1][0] if self._raw else 0.0)
        grouped = group_lines((t, line) for t, line in self._raw if t <= end)
        self.gpus.update(grouped.gpus)
        problem = self._problem or (grouped.unparsed[-1] if grouped.unparsed else "") or (
            impossible_problem(grouped.impossible) if grouped.impossible else "")
        values: dict[str, float] = {"unparsed": float(len(grouped.unparsed))}
        if grouped.exit_code is not None:  # read before the stop: it ended by itself
            values["exit_code"] = float(grouped.exit_code)
            problem = problem or f"nvidia-smi ended during the repeat (exit code {grouped.exit_code})"
        return [*without_cut_round(grouped.snapshots), WindowEnd(end, values, problem)]

    # -- figures (pure: what the repeats sampled) -----------------------------------------

    def summarize(self, snapshots: Sequence[Snapshot]) -> dict[str, Any]:
        if not self.interval:
            return {"source": "off"}
        if self.reason is not None:
            return {"source": "none", "reason": self.reason}
        return summarize_samples(snapshots, self.gpus, interval_s=self.interval)

    def merge(self, repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        return merge_summaries(repeats)

    def level_figures(self, block: Mapping[str, Any] | None,
                      level: Mapping[str, Any]) -> dict[str, Any]:
        return level_energy(block, level)


def _is_a_sampler(sampler: GpuSampler) -> Sampler:  # mypy checks the protocol here
    return sampler
