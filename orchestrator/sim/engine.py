"""The engine loop: runs the scheduler's steps against the monotonic clock.

Each step is due at the previous step's due time plus its model duration times the time
scale; the loop sleeps until then, so a late wake-up shortens the next sleep instead of
adding up (timing error does not accumulate). Steps that are already due (the `instant`
profile, or catching up) run back to back in short bursts (BURST_STEPS, BURST_S).

Injected failures (--crash-after-requests / --hang-after-requests N) trigger at the first
step, after N requests have finished, where some running request has produced a token: the
failure hits a request mid-stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from orchestrator.sim import failures
from orchestrator.sim.gpus import GpuMeter
from orchestrator.sim.logs import VllmLog
from orchestrator.sim.metrics import EngineMetrics
from orchestrator.sim.scheduler import Scheduler, Sequence

STATS_INTERVAL_S = 10.0  # vLLM's VLLM_LOG_STATS_INTERVAL, model seconds
# Steps already due run back to back, up to this many or this long (wall seconds) before
# yielding to the event loop, when the batch is large enough for it to pay: the `instant`
# profile then sends a few tokens per send() per connection. Small batches yield every step,
# so their tokens stay spread over time (reasoning arrives before content).
BURST_STEPS = 4
BURST_S = 0.0005
BURST_MIN_RUNNING = 8
MIN_STATS_INTERVAL_S = 0.5  # wall seconds: a tiny time scale must not flood the log


class Engine:
    def __init__(
        self,
        scheduler: Scheduler,
        metrics: EngineMetrics,
        log: VllmLog,
        *,
        time_scale: float,
        engine_proc: str,
        crash_after: int | None = None,
        hang_after: int | None = None,
        on_dead: Callable[[], None] | None = None,
        gpus: GpuMeter | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.metrics = metrics
        self.log = log
        self.scale = time_scale
        self.engine_proc = engine_proc
        self.crash_after = crash_after
        self.hang_after = hang_after
        self.on_dead = on_dead
        self.gpus = gpus  # told of every step: the stand-in GPU telemetry (sim/gpus.py)
        self.dead = False
        self.hung = False
        self.completed = 0
        self.submitted = 0
        self._wake = asyncio.Event()
        # Remote prefills pulling their KV (sim/disagg.py): they wait, as vLLM's
        # WAITING_FOR_REMOTE_KVS requests do, and cross the link one at a time.
        self._transfers: dict[Sequence, asyncio.TimerHandle] = {}
        self._link_free = 0.0

    # requests ---------------------------------------------------------------------
    def submit(self, seq: Sequence) -> None:
        seq.arrival = time.monotonic()
        self.submitted += 1
        self.scheduler.add(seq)
        self._wake.set()

    def submit_transferred(self, seq: Sequence, seconds: float, nbytes: float) -> None:
        """A remote prefill: its prompt's KV is pulled over the link first (`seconds` model
        seconds, once the transfers ahead of it are done), then it joins the queue."""
        now = time.monotonic()
        seq.arrival = now
        self.submitted += 1
        duration = seconds * self.scale
        self._link_free = max(now, self._link_free) + duration
        handle = asyncio.get_running_loop().call_later(
            self._link_free - now, self._transferred, seq, duration, nbytes)
        self._transfers[seq] = handle

    def _transferred(self, seq: Sequence, duration: float, nbytes: float) -> None:
        del self._transfers[seq]
        self.metrics.transferred(duration, nbytes)
        self.scheduler.add(seq)
        self._wake.set()

    def abort(self, seq: Sequence) -> None:
        """The client went away: the sequence leaves at the next step."""
        handle = self._transfers.pop(seq, None)
        if handle is not None:
            handle.cancel()
        if seq.finish_reason is None and not seq.aborted:
            if handle is None:
                self.scheduler.abort(seq)
            seq.finish_reason = "abort"
            self.metrics.finished_request(seq, time.monotonic(), "abort")
            self.completed += 1

    def counts(self) -> tuple[int, int, float]:
        """(running, waiting, KV usage) for /metrics and the stats line."""
        waiting = sum(1 for s in self.scheduler.waiting if not s.aborted) + len(self._transfers)
        return len(self.scheduler.running), waiting, self.scheduler.kv_usage

    # the loop ---------------------------------------------------------------------
    def _failure_due(self) -> str | None:
        def due(limit: int | None) -> bool:
            return (
                limit is not None
                and self.completed >= limit
                and any(s.generated > 0 for s in self.scheduler.running)
            )

        if due(self.crash_after):
            return "crash"
        if due(self.hang_after):
            return "hang"
        return None

    async def run(self) -> None:
        scheduler = self.scheduler
        scale = self.scale
        monotonic = time.monotonic
        due = yielded = monotonic()
        burst = 0
        while True:
            if not scheduler.has_work():
                self._wake.clear()
                await self._wake.wait()
                due = yielded = monotonic()
            failure = self._failure_due()
            if failure == "crash":
                self.die(f"--crash-after-requests {self.crash_after}")
                return
            if failure == "hang":
                self.hung = True
                self.log.warning("APIServer", "simulator.py:1",
                                 f"orch simulator: engine hang injected "
                                 f"(--hang-after-requests {self.hang_after})")  # fmt: skip
                await asyncio.Event().wait()  # forever: the process stays up, nothing moves
            plan = scheduler.plan_step(monotonic())
            if self.gpus is not None:
                self.gpus.step(due, plan.seconds, plan.running, plan.prefill_tokens)
            due += plan.seconds * scale
            now = monotonic()
            burst += 1
            if due > now:
                await asyncio.sleep(due - now)
                yielded, burst = monotonic(), 0
            elif burst >= BURST_STEPS or plan.running < BURST_MIN_RUNNING or now - yielded >= BURST_S:
                await asyncio.sleep(0)
                yielded, burst = monotonic(), 0
            self.completed += scheduler.complete_step(monotonic())

    def die(self, reason: str) -> None:
        """The engine crashes: in-flight requests get the error, /health turns 503."""
        self.dead = True
        failures.report_runtime_crash(self.log, self.engine_proc, reason)
        now = time.monotonic()
        pulling = list(self._transfers)
        for handle in self._transfers.values():
            handle.cancel()
        self._transfers.clear()
        for seq in pulling:
            seq.finish_reason = "error"
            if seq.sink is not None:
                seq.sink.on_error(seq, failures.ENGINE_DEAD)
        for seq in (*self.scheduler.fail_all(failures.ENGINE_DEAD), *pulling):
            self.metrics.finished_request(seq, now, "error")
        if self.on_dead is not None:
            self.on_dead()

    async def log_stats(self, interval: float | None = None) -> None:
        """vLLM's periodic `Engine 000: ...` line, while the engine is not idle."""
        wait = interval or max(STATS_INTERVAL_S * self.scale, MIN_STATS_INTERVAL_S)
        metrics = self.metrics
        last = time.monotonic()
        last_prompt, last_gen = metrics.prompt_tokens, metrics.generation_tokens
        while not self.dead:
            await asyncio.sleep(wait)
            now = time.monotonic()
            elapsed = max(now - last, 1e-9)
            prompt = (metrics.prompt_tokens - last_prompt) / elapsed
            gen = (metrics.generation_tokens - last_gen) / elapsed
            running, waiting, kv = self.counts()
            if prompt or gen or running or waiting:
                self.log.info("APIServer", "loggers.py:257",
                              f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, "
                              f"Avg generation throughput: {gen:.1f} tokens/s, "
                              f"Running: {running} reqs, Waiting: {waiting} reqs, "
                              f"GPU KV cache usage: {100 * kv:.1f}%, "
                              f"Prefix cache hit rate: 0.0%")  # fmt: skip
            last, last_prompt, last_gen = now, metrics.prompt_tokens, metrics.generation_tokens
