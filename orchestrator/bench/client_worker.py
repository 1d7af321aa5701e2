"""One client process of a level (client_processes.py starts it): `python -m
orchestrator.bench.client_worker FD`, FD one end of a socket pair to the sweep's process.

Over it, as pickled messages: the sweep sends its `Job`; the process builds its client and
workload, answers `ready` and waits for `go`; it runs its share of the load (the async
client of load.py, on a stamping loop as the sweep's own) until done or told `stop`, and
answers `done` with its `RequestRun` (its records numbered as the level's). It ignores
Ctrl-C (the sweep decides) and stops at once when the sweep's end of the pair closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from orchestrator.bench.client import StreamClient
from orchestrator.bench.client_shares import global_index
from orchestrator.bench.http_stream import parse_target
from orchestrator.bench.load import RequestRun, Shape, Stop, run_requests
from orchestrator.bench.progress import REFRESH_S, tally
from orchestrator.bench.stamping import run_on_stamping_loop
from orchestrator.bench.tokens import load_tokenizer
from orchestrator.bench.workload import Workload
from orchestrator.plan.models import Bench


@dataclass(frozen=True)
class Target:
    """Where and how every client process sends (the sweep's own client's settings)."""

    root: str
    model: str
    # handed over the socket, never in the arguments; never in a repr either
    api_key: str | None = field(default=None, repr=False)
    base_dir: Path | None = None  # a plan's relative dataset and tokenizer paths
    keep_text: bool = False  # a tokenizer counts the answers' text afterwards


@dataclass(frozen=True)
class Job:
    """What one process runs."""

    config: Bench
    target: Target
    shape: Shape
    id_prefix: str
    process: int
    processes: int


class _Interleaved:
    """Process k's request i is the level's request i * n + k: the prompts cycle as in one
    process."""

    def __init__(self, workload: Workload, process: int, processes: int) -> None:
        self.workload = workload
        self.process = process
        self.processes = processes

    def body(self, index: int) -> bytes:
        return self.workload.body(global_index(index, self.process, self.processes))


def _build(job: Job) -> tuple[StreamClient, Workload]:
    config, target = job.config, job.target
    tokens = load_tokenizer(config.tokenizer, base_dir=target.base_dir) if config.tokenizer else None
    workload = Workload(config, target.model, base_dir=target.base_dir, tokens=tokens)
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    client = StreamClient(parse_target(target.root), workload.path, headers=headers,
                          completions=workload.completions, timeout=config.request_timeout,
                          keep_text=target.keep_text)
    return client, workload


def serve(conn: Connection) -> None:
    """The process's whole life on its socket (see the module docstring)."""
    message = conn.recv()
    job: Job = message[1]
    try:
        client, workload = _build(job)
    except Exception as error:  # said to the sweep, which stops the level with it
        conn.send(("error", f"{type(error).__name__}: {error}"))
        return
    conn.send(("ready",))
    if conn.recv()[0] != "go":
        return
    gc.collect()
    gc.freeze()  # as the one-process level: nothing allocated before is scanned during it
    run = run_on_stamping_loop(_drive(conn, job, client, workload))
    conn.send(("done", run, client.keep_alive))


async def _drive(conn: Connection, job: Job, client: StreamClient,
                 workload: Workload) -> RequestRun:
    """Run the share until done or told to stop (or the sweep's end closes)."""
    stop = Stop()
    loop = asyncio.get_running_loop()

    def on_message() -> None:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            stop.set("interrupted", "the sweep's process is gone")
            return
        if message[0] == "stop":
            stop.set(str(message[1]))

    loop.add_reader(conn.fileno(), on_message)
    run = RequestRun()
    ticks = asyncio.ensure_future(_progress(conn, run))
    try:
        await run_requests(client, _Interleaved(workload, job.process, job.processes),
                           job.shape, stop, id_prefix=job.id_prefix, run=run)
    finally:
        ticks.cancel()
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(conn.fileno())
        client.close()
    for record in run.records:
        record.index = global_index(record.index, job.process, job.processes)
        record.client_process = job.process
    return run


async def _progress(conn: Connection, run: RequestRun) -> None:
    """Until cancelled: the run's tally to the sweep (its live view) every REFRESH_S."""
    while True:
        seen = tally(run.records)
        conn.send(("progress", seen.done, seen.failed, seen.tokens))
        await asyncio.sleep(REFRESH_S)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep decides (see the docstring)
    conn = Connection(int(argv[0]))
    try:
        serve(conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return 1  # the sweep is gone: nobody to answer
    except Exception as error:  # the sweep says it; its stderr is not shown
        with contextlib.suppress(OSError):
            where = traceback.extract_tb(error.__traceback__)[-1]
            conn.send(("error", f"{type(error).__name__}: {error} "
                                f"({Path(where.filename).name}:{where.lineno})"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
