"""Wait for the model server: a total start-up deadline, visible phases, death detected at
once and explained.

Every poll is one round trip (`watch_command`: liveness + the new log bytes) plus HTTP
probes (`ServerClient.ready`: `/health` answers 200, `/v1/models` lists the served name,
and a one-token chat completion answers; vLLM can look healthy before it can serve). A death
during start-up ends the wait with the diagnosis of the log; an unexplained death is
relaunched while the restart budget lasts; the deadline ends it with the log tail.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.engines import engine
from orchestrator.engines.base import Engine, StartupReader, StartupStatus
from orchestrator.errors import CrashLoop, ServiceError, ServiceHung, StartupFailed, StartupTimeout
from orchestrator.events import Emit, StageEvent
from orchestrator.plan.models import Health
from orchestrator.server_client import CHAT_ANSWERED, ServerClient
from orchestrator.service.backends import Backend, ServicePaths, watch_command
from orchestrator.service.diagnosis import Diagnosis, diagnose, tail
from orchestrator.transport.base import Transport

TAIL_LINES = 30
PROGRESS_EVERY = 5.0  # seconds between progress lines within one phase
HEARTBEAT_EVERY = 30.0  # seconds between lines while nothing moves
FROZEN_POLLS = 2  # polls in a row in state T before it is called hung
SILENT_POLLS = 3  # timed-out checks in a row, after the API came up, before it is called hung
REFUSED_POLLS = 3  # chats refused (4xx) in a row, after the API came up, before it is a failure
CHAT_REFUSED = CHAT_ANSWERED + "4"
STOP_SAID_S = 5.0  # how long a stopped server waits for the lock program to say who stopped it
_TIMEOUTS = {"ReadTimeout", "WriteTimeout", "ConnectTimeout", "PoolTimeout", "TimeoutException"}


@dataclass
class Readiness:
    seconds: float
    phases: list[dict[str, Any]]
    restarts: int
    log: str
    facts: dict[str, Any] = field(default_factory=dict)


def failure(
    kind: type[ServiceError], what: str, diagnoses: list[Diagnosis], log: str
) -> ServiceError:
    """The error that ends the wait, with the diagnoses attached for the run folder."""
    return kind(describe_failure(what, diagnoses, log), diagnoses=[d.to_json() for d in diagnoses])


def describe_failure(what: str, diagnoses: list[Diagnosis], log: str) -> str:
    lines = [what]
    for diag in diagnoses:
        if diag.level != "error":
            continue
        lines.append(f"  cause: {diag.cause}")
        lines.append(f"  fix:   {diag.fix}")
        lines.append(f"  log:   {diag.evidence_line}")
        lines += [f"  and:   {line}" for line in diag.related]
    lines.append("  last log lines:")
    lines += [f"    {line}" for line in tail(log, TAIL_LINES)]
    return "\n".join(lines)


def _decoder() -> codecs.IncrementalDecoder:
    """Log bytes -> text across polls: a character cut between two polls is kept whole."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


def parse_watch(stdout: str) -> tuple[str, bytes]:
    """`watch_command`'s output -> (alive | dead | stopped, the new log bytes)."""
    state, _, encoded = stdout.partition("\n")
    try:
        chunk = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        chunk = b""
    return state.strip(), chunk


def wait_ready(
    transport: Transport,
    *,
    backend: Backend,
    paths: ServicePaths,
    health: Health,
    base_url: str,
    model: str,
    api_key: str | None,
    relaunch: Callable[[], None],
    max_restarts: int,
    emit: Emit,
    engine_name: str,
    still_ours: Callable[[float], None] = lambda wait: None,
) -> Readiness:
    """Poll until the server answers a chat, dies for a known cause, or the deadline passes.
    `still_ours(wait)` is asked at every poll: it raises once another took the apply's locks
    (a stop that broke them is waited for a moment, so the error names it)."""
    watch = _Watch(transport, backend, paths, health, engine(engine_name), emit)
    with ServerClient(base_url, api_key=api_key, timeout=health.request_timeout) as client:
        while True:
            status = watch.read_log()
            still_ours(STOP_SAID_S if watch.state == "stopped" else 0.0)
            if watch.frozen(status):
                time.sleep(health.poll_interval)
                continue
            if watch.died(status, max_restarts):
                relaunch()
                watch.restart()
                continue
            ready, missing = client.ready(model)
            watch.check_answers(status, missing)
            if ready:
                return watch.finish(status)
            watch.check_deadline(status, missing)
            time.sleep(min(health.poll_interval, max(0.0, watch.deadline - time.monotonic())))


class _Watch:
    """One start-up being watched: its log read so far, the engine's reader of it, and the
    counts of polls in a row that found it stopped, silent or refusing."""

    def __init__(self, transport: Transport, backend: Backend, paths: ServicePaths,
                 health: Health, chosen: Engine, emit: Emit) -> None:
        self.transport, self.backend, self.paths = transport, backend, paths
        self.health, self.engine, self.emit = health, chosen, emit
        self.started = time.monotonic()
        self.deadline = self.started + health.startup_timeout
        self.restarts = 0
        self.frozen_polls = self.silent = self.refused = 0
        self._fresh_log()

    @property
    def host(self) -> str:
        return self.transport.host

    def restart(self) -> None:
        """A relaunched server: its log and reader start over."""
        self.restarts += 1
        self._fresh_log()

    def _fresh_log(self) -> None:
        self.offset, self.log, self.last_label, self.last_emit = 0, "", "", 0.0
        self.decoder = _decoder()
        self.reader: StartupReader = self.engine.startup(time.time())

    def diagnose(self, text: str) -> list[Diagnosis]:
        return diagnose(text, self.engine.name)

    def read_log(self) -> StartupStatus | None:
        """One round trip: liveness and the new log bytes, fed to the reader."""
        result = self.transport.run(watch_command(self.backend, self.paths, self.offset),
                                    check=False, timeout=60)
        self.state, chunk = parse_watch(result.stdout)
        self.offset += len(chunk)
        new = self.decoder.decode(chunk)
        self.log += new
        now = time.time()
        self.reader.feed_text(new, now)
        status = self.reader.current(now)
        if status is not None:
            self._show(status, now)
        return status

    def _show(self, status: StartupStatus, now: float) -> None:
        shown = f"{status.label}, {status.progress}" if status.progress else status.label
        # A new phase at once; progress within a phase at most every PROGRESS_EVERY; and a
        # heartbeat, so a 7-minute weight load is never silent.
        moved = shown != self.last_label and (
            status.label not in self.last_label or now - self.last_emit >= PROGRESS_EVERY)
        if moved or now - self.last_emit >= HEARTBEAT_EVERY:
            self.last_label, self.last_emit = shown, now
            self.emit(StageEvent(self.host, stage="startup", status="running",
                                 message=f"{shown} ({status.total_s:.1f}s since launch)"))

    def frozen(self, status: StartupStatus | None) -> bool:
        """Stopped (state T): a wait; twice in a row, hung."""
        if not self.state.startswith("frozen"):
            self.frozen_polls = 0
            return False
        self.frozen_polls += 1
        if self.frozen_polls >= FROZEN_POLLS:
            pid = self.state.partition(" ")[2] or "?"
            raise failure(ServiceHung,
                          f"{self.host}: the server process {pid} is stopped (state T: SIGSTOP "
                          f"or a debugger) and cannot answer; `kill -CONT {pid}` on the host "
                          "resumes it", [], self.log)
        return True

    def died(self, status: StartupStatus | None, max_restarts: int) -> bool:
        """Whether it died without a known cause and may be relaunched; a known cause, a spent
        restart budget or `orch stop` end the wait."""
        if self.state == "stopped":
            raise StartupFailed(f"{self.host}: the server was stopped (orch stop) during "
                                "start-up; not relaunching it")
        if self.state == "alive":
            return False
        diagnoses = self.diagnose(self.log)
        phase = status.label if status else "launch"
        if any(d.level == "error" for d in diagnoses):
            raise failure(StartupFailed, f"{self.host}: the server died during start-up ({phase})",
                          diagnoses, self.log)
        if self.restarts >= max_restarts:
            died = ("once" if self.restarts == 0 else f"{self.restarts + 1} times")
            raise failure(CrashLoop,
                          f"{self.host}: the server died {died} during start-up "
                          f"(service.restart.max_restarts: {max_restarts}); "
                          "not relaunching", diagnoses, self.log)
        self.emit(StageEvent(self.host, stage="startup", status="changed",
                             message=f"died without a known cause; relaunch "
                                     f"{self.restarts + 1}/{max_restarts}"))
        return True

    def check_answers(self, status: StartupStatus | None, missing: str) -> None:
        """Up, then silent, or up and refusing a chat (4xx), poll after poll: waiting longer
        changes nothing (e.g. a model folder without a tokenizer or chat template)."""
        api_up = status is not None and status.api_up
        self.silent = self.silent + 1 if api_up and missing in _TIMEOUTS else 0
        self.refused = self.refused + 1 if api_up and missing.startswith(CHAT_REFUSED) else 0
        if self.refused >= REFUSED_POLLS:
            raise failure(StartupFailed,
                          f"{self.host}: the server is up but refuses a one-token chat "
                          f"completion ({self.refused} checks in a row): {missing}",
                          self.diagnose(self.log + "\n" + missing), self.log)
        if self.silent >= SILENT_POLLS:
            raise failure(ServiceHung,
                          f"{self.host}: the server's API came up, then stopped answering "
                          f"({self.silent} checks in a row timed out after "
                          f"{self.health.request_timeout:g} s each; the process is alive)",
                          self.diagnose(self.log), self.log)

    def finish(self, status: StartupStatus | None) -> Readiness:
        if status is None or not status.ready:
            # It came up between this poll's log read and its health check: the lines since
            # (its last phases, the engine's own figures) belong in the record too.
            rest = self.transport.run(watch_command(self.backend, self.paths, self.offset),
                                      check=False, timeout=60)
            new = self.decoder.decode(parse_watch(rest.stdout)[1])
            self.log += new
            self.reader.feed_text(new, time.time())
        return Readiness(seconds=time.monotonic() - self.started, phases=self.reader.summary(),
                         restarts=self.restarts, log=self.log, facts=dict(self.reader.facts))

    def check_deadline(self, status: StartupStatus | None, missing: str) -> None:
        if time.monotonic() >= self.deadline:
            phase = status.label if status else "launch"
            raise failure(StartupTimeout,
                          f"{self.host}: not ready after {self.health.startup_timeout:g} s "
                          f"(health.startup_timeout); last phase: {phase}; last check: {missing}",
                          self.diagnose(self.log), self.log)
