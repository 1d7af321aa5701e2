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

from orchestrator.engines.vllm_phases import PhaseTracker
from orchestrator.errors import CrashLoop, ServiceError, ServiceHung, StartupFailed, StartupTimeout
from orchestrator.events import Emit, PhaseEvent
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
) -> Readiness:
    started = time.monotonic()
    deadline = started + health.startup_timeout
    tracker = PhaseTracker(origin=time.time())
    offset, log, restarts, last_label, last_emit = 0, "", 0, "", 0.0
    frozen = silent = refused = 0  # polls in a row that found it stopped, or silent since its API came up
    decoder = _decoder()
    with ServerClient(base_url, api_key=api_key, timeout=health.request_timeout) as client:
        while True:
            result = transport.run(watch_command(backend, paths, offset), check=False, timeout=60)
            state, chunk = parse_watch(result.stdout)
            offset += len(chunk)
            new = decoder.decode(chunk)
            log += new
            now = time.time()
            tracker.feed_text(new, now)
            status = tracker.current(now)
            if status is not None:
                shown = f"{status.label}, {status.progress}" if status.progress else status.label
                # A new phase at once; progress within a phase at most every PROGRESS_EVERY;
                # and a heartbeat, so a 7-minute weight load is never silent.
                moved = shown != last_label and (
                    status.label not in last_label or now - last_emit >= PROGRESS_EVERY)
                if moved or now - last_emit >= HEARTBEAT_EVERY:
                    last_label, last_emit = shown, now
                    emit(PhaseEvent(transport.host, phase="startup", status="running",
                                    message=f"{shown} ({status.total_s:.1f}s since launch)"))
            if state.startswith("frozen"):
                frozen += 1
                if frozen >= FROZEN_POLLS:
                    pid = state.partition(" ")[2] or "?"
                    raise failure(ServiceHung,
                                  f"{transport.host}: the server process {pid} is stopped (state T:"
                                  f" SIGSTOP or a debugger) and cannot answer; `kill -CONT {pid}` "
                                  "on the host resumes it", [], log)
                time.sleep(health.poll_interval)
                continue
            frozen = 0
            if state == "stopped":
                raise StartupFailed(
                    f"{transport.host}: the server was stopped (orch stop) during start-up; "
                    "not relaunching it"
                )
            if state != "alive":
                diagnoses = diagnose(log)
                known = [d for d in diagnoses if d.level == "error"]
                phase = status.label if status else "launch"
                if known:
                    raise failure(StartupFailed,
                                  f"{transport.host}: the server died during start-up ({phase})",
                                  diagnoses, log)
                if restarts >= max_restarts:
                    raise failure(CrashLoop,
                                  f"{transport.host}: the server died {restarts + 1} times during "
                                  f"start-up (service.restart.max_restarts: {max_restarts}); "
                                  "not relaunching", diagnoses, log)
                restarts += 1
                emit(PhaseEvent(transport.host, phase="startup", status="changed",
                                message=f"died without a known cause; relaunch {restarts}/{max_restarts}"))
                relaunch()
                offset, log, last_label = 0, "", ""
                decoder = _decoder()
                tracker = PhaseTracker(origin=time.time())
                continue
            ready, missing = client.ready(model)
            api_up = status is not None and status.name in ("api_server", "ready")
            silent = silent + 1 if api_up and missing in _TIMEOUTS else 0
            # Up, listing the model, and refusing a chat (4xx) poll after poll: waiting longer
            # changes nothing (e.g. a model folder without a tokenizer or chat template).
            refused = refused + 1 if api_up and missing.startswith(CHAT_REFUSED) else 0
            if refused >= REFUSED_POLLS:
                raise failure(StartupFailed,
                              f"{transport.host}: the server is up but refuses a one-token chat "
                              f"completion ({refused} checks in a row): {missing}",
                              diagnose(log + "\n" + missing), log)
            if silent >= SILENT_POLLS:
                raise failure(ServiceHung,
                              f"{transport.host}: the server's API came up, then stopped answering "
                              f"({silent} checks in a row timed out after "
                              f"{health.request_timeout:g} s each; the process is alive)",
                              diagnose(log), log)
            if ready:
                if status is None or status.name != "ready":
                    # It came up between this poll's log read and its health check: the lines
                    # since (its last phases, vLLM's own figures) belong in the record too.
                    rest = transport.run(watch_command(backend, paths, offset), check=False,
                                         timeout=60)
                    new = decoder.decode(parse_watch(rest.stdout)[1])
                    log += new
                    tracker.feed_text(new, time.time())
                return Readiness(
                    seconds=time.monotonic() - started, phases=tracker.summary(),
                    restarts=restarts, log=log, facts=dict(tracker.facts),
                )
            if time.monotonic() >= deadline:
                phase = status.label if status else "launch"
                raise failure(StartupTimeout,
                              f"{transport.host}: not ready after {health.startup_timeout:g} s "
                              f"(health.startup_timeout); last phase: {phase}; last check: {missing}",
                              diagnose(log), log)
            time.sleep(min(health.poll_interval, max(0.0, deadline - time.monotonic())))
