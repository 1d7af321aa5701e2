"""Client processes: one repeat of a level driven by several processes, each running the
async client (load.run_requests) on its share of the load (client_shares.py).

`ClientGroup.start()` starts them (`python -m orchestrator.bench.client_worker`, each
with one end of a socket pair) and hands each its job; each builds its own client and
workload and says `ready`. Once every one is ready (the barrier), `run()` says `go` to all,
and each sends back its `RequestRun` when its share is done; the parent merges them. The
parent's `Stop` (Ctrl-C, the lock lost) is passed on to every process; a process that
stops on its own (the server gone) stops the others too; a process that fails or dies
stops the level (`client_failed`, the level partial). `close()` ends and reaps every
process, and a process whose parent is gone (its socket closed) stops at once: none
outlives the sweep. They run in a session of their own, so a terminal's Ctrl-C reaches
only the sweep, which tells them: the level ends as a one-process level does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orchestrator
from orchestrator.bench.client_shares import merge, shares
from orchestrator.bench.client_worker import Job, Target
from orchestrator.bench.load import GONE_GRACE_S, RequestRun, Shape, Stop
from orchestrator.bench.progress import Tally
from orchestrator.plan.models import Bench

__all__ = ["ClientGroup", "ClientProcessError", "Job", "Target", "jobs_for"]

# After the processes are told to stop, the longest wait for their records: their
# requests are cancelled at once (or get GONE_GRACE_S when the server is gone)
STOP_GRACE_S = GONE_GRACE_S + 10.0
JOIN_S = 5.0  # a process that sent its records and does not exit within this is ended


class ClientProcessError(Exception):
    """A client process failed to start or ended without its records."""


@dataclass
class _Member:
    name: str
    process: subprocess.Popen[bytes]
    conn: Connection
    ready: asyncio.Future[None]
    done: asyncio.Future[tuple[RequestRun, bool]]
    tally: Tally = field(default_factory=Tally)  # its requests so far, as it last said


class ClientGroup:
    """The processes of one repeat, from spawn to join."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.jobs = list(jobs)
        self.members: list[_Member] = []
        self.keep_alive = True  # False once any process's server closed kept connections

    async def start(self, stop: Stop) -> bool:
        """Start every process and wait until all are ready (the barrier): False when
        `stop` was set meanwhile; raises ClientProcessError when one fails first."""
        loop = asyncio.get_running_loop()
        for job in self.jobs:
            member = _spawn(job, loop)
            self.members.append(member)
            loop.add_reader(member.conn.fileno(), self._on_message, member)
        ready: asyncio.Future[list[Any]] = asyncio.ensure_future(
            asyncio.gather(*(m.ready for m in self.members), return_exceptions=True))
        waiter: asyncio.Future[Any] = asyncio.ensure_future(stop.event.wait())
        try:
            await asyncio.wait({ready, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not ready.done():
            ready.cancel()
            return False
        failures = [r for r in ready.result() if r is not None]
        if failures:
            raise ClientProcessError(str(failures[0]))
        return True

    def _on_message(self, member: _Member) -> None:
        loop = asyncio.get_running_loop()
        try:
            message: tuple[Any, ...] = member.conn.recv()
        except (EOFError, OSError):
            loop.remove_reader(member.conn.fileno())
            with contextlib.suppress(subprocess.TimeoutExpired):
                member.process.wait(JOIN_S)  # its socket closed: it is exiting
            code = member.process.returncode
            self._fail(member, f"{member.name} ended before it sent its records"
                               + (f" (exit code {code})" if code is not None else ""))
            return
        if message[0] == "progress":
            member.tally = Tally(*message[1:])
        elif message[0] == "ready":
            member.ready.set_result(None)
        elif message[0] == "error":
            self._fail(member, f"{member.name} failed: {message[1]}")
        elif message[0] == "done":
            loop.remove_reader(member.conn.fileno())
            member.done.set_result((message[1], bool(message[2])))

    @staticmethod
    def _fail(member: _Member, text: str) -> None:
        for future in (member.ready, member.done):
            if not future.done():
                future.set_exception(ClientProcessError(text))

    def tally(self) -> Tally:
        """The processes' requests so far (each says its own twice a second)."""
        return sum((m.tally for m in self.members), Tally())

    async def run(self, stop: Stop) -> RequestRun:
        """Say go to every process and merge their runs; passes `stop` on to them, and
        sets it when one stops on its own or fails."""
        self._tell(("go",))
        runs: dict[int, RequestRun] = {}
        pending: dict[asyncio.Future[Any], int] = {m.done: k for k, m in enumerate(self.members)}
        told = False
        while pending:
            watched = set(pending)
            waiter = None if told else asyncio.ensure_future(stop.event.wait())
            if waiter is not None:
                watched.add(waiter)
            finished, _ = await asyncio.wait(watched, timeout=STOP_GRACE_S if told else None,
                                             return_when=asyncio.FIRST_COMPLETED)
            if waiter is not None:
                waiter.cancel()
            if not finished:
                stop.set("client_failed", "a client process did not end when told to stop")
                break
            for future in [f for f in finished if f in pending]:
                runs[pending.pop(future)] = self._take(future, stop)
            if stop.is_set and not told:
                self._tell(("stop", stop.reason))
                told = True
        return merge([runs.get(k) or RequestRun(stopped="client_failed")
                      for k in range(len(self.members))])

    def _take(self, future: asyncio.Future[Any], stop: Stop) -> RequestRun:
        error = future.exception()
        if error is not None:
            stop.set("client_failed", str(error))
            return RequestRun(stopped="client_failed")
        run: RequestRun = future.result()[0]
        keep_alive: bool = future.result()[1]
        self.keep_alive = self.keep_alive and keep_alive
        if run.stopped:
            stop.set(run.stopped)
        return run

    def _tell(self, message: tuple[Any, ...]) -> None:
        for member in self.members:
            with contextlib.suppress(OSError):
                member.conn.send(message)

    def close(self) -> None:
        """End and join every process (those that finished exit on their own)."""
        loop = asyncio.get_running_loop()
        for member in self.members:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(member.conn.fileno())
            member.conn.close()  # a process still running reads EOF and stops
        for member in self.members:
            try:
                member.process.wait(JOIN_S)
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()
            for future in (member.ready, member.done):
                if future.done() and not future.cancelled():
                    future.exception()  # retrieved: a failure is said once, by the level


def _spawn(job: Job, loop: asyncio.AbstractEventLoop) -> _Member:
    """Start one process with its end of a socket pair, and send it its job."""
    ours, theirs = socket.socketpair()
    root = str(Path(orchestrator.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    with theirs:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.bench.client_worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    conn = Connection(ours.detach())
    conn.send(("job", job))
    name = f"client process {job.process + 1} of {job.processes}"
    return _Member(name, process, conn, loop.create_future(), loop.create_future())


def jobs_for(config: Bench, target: Target, shape: Shape, id_prefix: str) -> list[Job]:
    """One job per process, each with its share of `shape`."""
    parts = shares(shape, config.client_processes)
    return [Job(config, target, part, id_prefix, k, len(parts)) for k, part in enumerate(parts)]
