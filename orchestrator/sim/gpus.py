"""The simulated GPUs: what a DCGM exporter would read from them, from what the engine did.

The engine tells the meter of every step it plans (`step`: when it starts on the wall clock,
its model seconds, its running batch and its prefill tokens). A step is a stretch of wall
time, [start, start + seconds x time scale], and its work is spread evenly over it, so a
reading between two steps or in the middle of one counts exactly the part that has passed.
`read(now)` gives the figures of the window since the previous read, at most the last
SAMPLE_S (the driver's own sampling period: a GPU idle for a minute and then busy for the last
second reads busy, as nvidia-smi's and DCGM's utilization do), per GPU (every GPU of a TP group
does the same work):

- util      the share of the window's model time the engine was stepping (DCGM_FI_DEV_GPU_UTIL);
- sm_active each step's `(1 - allreduce_wait) x sm_active_computing x fill(batch)`, weighted
            by its time: while the all-reduce runs the SMs wait, and a small batch leaves
            SMs empty: fill(b) = b / (b + sm_half_batch), b = running + prefill tokens;
- dram      `(1 - allreduce_wait) x dram_active_computing`, by time likewise;
- pcie      tokens (generated and prompt) x `pcie_bytes_per_token`, per model second, half
            received and half sent (a ring all-reduce sends what it receives);
- power     idle + util x (waiting - idle) + (sm_active / sm_active_computing) x
            (full_compute - waiting), at most the limit; temperature follows power; the SM
            clock is the boost clock while busy, the idle clock otherwise.

Rates are per model second (the levels' figures are model time); ratios do not depend on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from orchestrator.sim.profiles import GpuModel, Profile

SAMPLE_S = 1.0  # wall seconds a reading covers at most
RESERVED_GIB = 2.0  # CUDA context, activations and graphs, beside weights and KV cache


class Work(NamedTuple):
    """What one step (or a window) did, in model seconds and bytes."""

    busy_s: float = 0.0
    sm_s: float = 0.0
    dram_s: float = 0.0
    pcie_bytes: float = 0.0

    def plus(self, other: Work, share: float = 1.0) -> Work:
        return Work(*(a + b * share for a, b in zip(self, other, strict=True)))


@dataclass(frozen=True)
class Reading:
    """One GPU's figures over a window."""

    util: float  # 0-1
    sm_active: float  # 0-1
    dram_active: float  # 0-1
    pcie_rx_bytes_s: float  # per model second
    pcie_tx_bytes_s: float
    power_w: float
    power_limit_w: float
    sm_clock_mhz: int
    temp_c: float
    mem_used_mib: int
    mem_total_mib: int


def step_work(model: GpuModel, seconds: float, running: int, prefill: int) -> Work:
    """One step's work on each GPU."""
    if running + prefill <= 0:
        return Work()
    batch = running + prefill
    computing = seconds * (1.0 - model.allreduce_wait)
    fill = batch / (batch + model.sm_half_batch)
    return Work(seconds, computing * model.sm_active_computing * fill,
                computing * model.dram_active_computing, batch * model.pcie_bytes_per_token)


def reading(profile: Profile, work: Work, model_s: float) -> Reading:
    """The figures of `work` done over `model_s` model seconds."""
    model = profile.gpu
    assert model is not None
    span = max(model_s, 1e-12)
    util = min(1.0, work.busy_s / span)
    sm = min(1.0, work.sm_s / span)
    computing = sm / model.sm_active_computing if model.sm_active_computing else 0.0
    power = (model.idle_w + util * (model.waiting_w - model.idle_w)
             + computing * (model.full_compute_w - model.waiting_w))
    power = min(power, model.power_limit_w)
    pcie = work.pcie_bytes / span
    used = round((profile.weights_gib + profile.kv_cache_gib + RESERVED_GIB) * 1024)
    return Reading(
        util=util, sm_active=sm, dram_active=min(1.0, work.dram_s / span),
        pcie_rx_bytes_s=pcie / 2, pcie_tx_bytes_s=pcie / 2,
        power_w=power, power_limit_w=model.power_limit_w,
        sm_clock_mhz=model.boost_mhz if util > 0 else model.idle_mhz,
        temp_c=30.0 + 0.08 * power, mem_used_mib=min(used, model.memory_mib),
        mem_total_mib=model.memory_mib)


def steady(profile: Profile, batch: int) -> Reading:
    """The figures of an engine stepping back to back at `batch` running sequences (no
    prefill): the calibration table of profiles.py."""
    assert profile.gpu is not None
    seconds = profile.step_seconds(batch)
    return reading(profile, step_work(profile.gpu, seconds, batch, 0), seconds)


class GpuMeter:
    """The running integral of the engine's steps, read window by window (module doc)."""

    def __init__(self, profile: Profile, time_scale: float, now: float | None = None) -> None:
        assert profile.gpu is not None, f"{profile.name} has no GPUs"
        self.profile = profile
        self.model = profile.gpu
        self.scale = time_scale
        self.done = Work()  # the steps before the current one
        self.current = Work()
        self.start = self.end = now if now is not None else time.monotonic()
        self.last_read = self.start
        self.last_total = Work()
        self.last_reading = reading(profile, Work(), 1.0)
        self.history: list[tuple[float, Work]] = []  # (a step's start, the work done before it)

    def step(self, start: float, seconds: float, running: int, prefill: int) -> None:
        """A step of `seconds` model seconds starting at `start` (monotonic wall clock)."""
        self.done = self.done.plus(self.current)
        self.current = step_work(self.model, seconds, running, prefill)
        self.start, self.end = start, start + seconds * self.scale
        self.history.append((start, self.done))
        if len(self.history) > 64 and self.history[32][0] < start - 2 * SAMPLE_S:
            del self.history[:32]  # only the last SAMPLE_S is ever looked back at

    def total(self, now: float) -> Work:
        """All the work done up to `now`, the current step's in proportion."""
        length = self.end - self.start
        share = 1.0 if length <= 0 else min(1.0, max(0.0, (now - self.start) / length))
        return self.done.plus(self.current, share)

    def _done_at(self, moment: float) -> Work:
        """The work done by `moment` (the last step started by then counts whole or not at
        all: a step is milliseconds of a one-second period)."""
        if moment >= self.start:
            return self.total(moment)
        before = [done for start, done in self.history if start <= moment]
        return before[-1] if before else (self.history[0][1] if self.history else Work())

    def read(self, now: float | None = None) -> Reading:
        """The figures since the previous read (the last ones again if no time passed)."""
        now = time.monotonic() if now is None else now
        elapsed = now - self.last_read
        if elapsed <= 0:
            return self.last_reading
        total = self.total(now)
        since = self.last_total
        if elapsed > SAMPLE_S:  # the work done before the sample period: the last step before it
            elapsed = SAMPLE_S
            since = self._done_at(now - SAMPLE_S)
        window = Work(*(a - b for a, b in zip(total, since, strict=True)))
        self.last_reading = reading(self.profile, window, elapsed / self.scale)
        self.last_read, self.last_total = now, total
        return self.last_reading
