"""`orch sim serve`: one process that starts like vLLM, serves like vLLM, and dies like vLLM.

Order of events, as in vLLM (facts §1.1): the socket is bound first (a port in use fails
at once), the start-up phases are logged, and only then does the socket listen (before that,
connecting is refused). SIGTERM/SIGINT shut down gracefully (exit 0); an injected engine
crash answers /health with 503 for CRASH_GRACE_S seconds, then exits with 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import threading
import traceback
from collections.abc import Mapping
from typing import Any

from orchestrator import masking
from orchestrator.sim import cluster, failures
from orchestrator.sim.app import SimApp
from orchestrator.sim.deployment import MODELLED_FLAGS
from orchestrator.sim.engine import Engine
from orchestrator.sim.gpus import GpuMeter
from orchestrator.sim.http11 import HttpServer
from orchestrator.sim.logs import VllmLog
from orchestrator.sim.metrics import EngineMetrics
from orchestrator.sim.options import SimOptions, parse_serve_args
from orchestrator.sim.scheduler import Scheduler
from orchestrator.sim.startup import Startup, StartupFailed

CRASH_GRACE_S = 1.0  # wall seconds between an engine crash and the process exit


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind (not listen) like vLLM: SO_REUSEADDR and SO_REUSEPORT."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def version_banner(version: str, model: str, environ: Mapping[str, str]) -> str:
    """vLLM's first line: its ASCII-art logo (monochrome, as in a log file) holding the
    version and model, or the plain sentence with VLLM_DISABLE_LOG_LOGO=1."""
    try:
        plain = bool(int(environ.get("VLLM_DISABLE_LOG_LOGO", "0")))
    except ValueError:
        plain = False
    if plain:
        return f"vLLM server version {version}, serving model {model}"
    return (
        "\n       █     █     █▄   ▄█\n"
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}\n"
        f"  █▄█▀ █     █     █     █  model   {model}\n"
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n"
    )


def _header(options: SimOptions, log: VllmLog) -> None:
    api = "APIServer"
    log.warning(api, "simulator.py:1",
                f"orch simulator: this is not vLLM but a simulated server "
                f"(profile={options.profile.name}, time-scale={options.time_scale!r}, "
                f"vllm-version={options.version.text})")  # fmt: skip
    new = options.version.new_wording
    log.info(api, "startup.py:38" if new else "utils.py:302",
             version_banner(options.version.text, options.model, os.environ))
    log.info(api, "startup.py:96" if new else "utils.py:238",
             f"non-default args: {options.non_default!r}")
    if options.memory_note:
        log.warning(api, "simulator.py:1", f"orch simulator: {options.memory_note}")
    for name, value in options.ignored:
        if options.deployment_modelled and name in MODELLED_FLAGS:
            continue  # the what-if model prices them (sim/deployment.py)
        shown = f"--{name}" if value is None else f"--{name} {value}"
        log.warning(api, "simulator.py:1", f"Ignoring vLLM flag {shown} (not modelled by the simulator)")


def _shutdown_lines(log: VllmLog) -> None:
    log.info("APIServer", "launcher.py:122", "Shutting down FastAPI HTTP server.")
    log.uvicorn("Shutting down")
    log.uvicorn("Waiting for application shutdown.")
    log.uvicorn("Application shutdown complete.")
    log.uvicorn(f"Finished server process [{log.pid}]")


def _port_failure(log: VllmLog, error: OSError | None) -> int:
    if error is None or error.errno == errno.EADDRINUSE:
        text = failures.PORT_IN_USE
    else:
        text = f"OSError: [Errno {error.errno}] {error.strerror}"
    failures.report_api_failure(log, failures.PORT_FRAMES, text)
    return 1


async def _join(options: SimOptions, log: VllmLog, halt: threading.Event) -> cluster.Group:
    """Form the group this node belongs to (sim/cluster.py), off the event loop."""
    scale = options.startup_time_scale
    timeout = max(30.0, 600.0 * scale)
    if options.distributed_backend == "ray":
        return await asyncio.to_thread(cluster.join_ray, options.world_size, log,
                                       wait_scale=scale, stop=halt)
    if options.node_rank == 0:
        return await asyncio.to_thread(cluster.mp_head, options.nnodes, options.master_addr,
                                       options.master_port, log, timeout=timeout, stop=halt)
    return await asyncio.to_thread(cluster.mp_worker, options.node_rank, options.master_addr,
                                   options.master_port, log, timeout=timeout, stop=halt)


def _watch(group: cluster.Group) -> asyncio.Future[str]:
    """Why the group broke, once it does. A daemon thread: a member stuck in a call to a
    dead node must never keep the process from exiting."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(why: str) -> None:
        if not future.done():
            future.set_result(why)

    def run() -> None:
        loop.call_soon_threadsafe(settle, group.wait_lost())

    threading.Thread(target=run, name="group-watch", daemon=True).start()
    return future


def _lost(log: VllmLog, why: str) -> None:
    log.error("EngineCore_DP0", "core.py:1", f"EngineCore encountered a fatal error: a "
              f"node of the group is gone: {why}")


async def _serve_headless(options: SimOptions, log: VllmLog, stop: asyncio.Event) -> int:
    """A worker node of an mp group: no API server, just a member until the group ends."""
    log.info("APIServer", "serve.py:1", f"Launching a headless node (rank {options.node_rank} "
             f"of {options.nnodes}, master {options.master_addr}:{options.master_port})")
    halt = threading.Event()
    try:
        group = await _join(options, log, halt)
    except cluster.ClusterFailed:
        return 1
    watch = _watch(group)
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    await asyncio.wait({watch, stopping}, return_when=asyncio.FIRST_COMPLETED)
    halt.set()
    group.close()
    if watch.done() and watch.result():
        _lost(log, watch.result())
        return 1
    return 0


async def serve(options: SimOptions, log: VllmLog | None = None) -> int:
    log = log or VllmLog()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    _header(options, log)
    if options.headless:
        return await _serve_headless(options, log, stop)
    if options.fail_at_startup == "port-in-use":
        return _port_failure(log, None)
    try:
        sock = bind_socket(options.host, options.port)
    except OSError as error:
        return _port_failure(log, error)
    dead = asyncio.Event()
    engine, metrics = _engine(options, log, dead)
    app = SimApp(options, engine, metrics, log)
    server = HttpServer(app.handle, [("x-orch-simulator", options.marker())])
    halt = threading.Event()
    group: cluster.Group | None = None
    if options.multi_node:
        joined = await _join_unless_stopped(options, log, halt, stop)
        if not isinstance(joined, cluster.Group):  # stopped (0) or the group failed (1)
            sock.close()
            return joined
        group = joined
        _end_when_lost(group, log, dead)
    startup = asyncio.create_task(Startup(options, log, lambda: server.serve(sock)).run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({startup, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not startup.done():
            startup.cancel()
            return 0
        try:
            startup.result()
        except StartupFailed as failure:
            return failure.code
        return await _run_engine(options, log, engine, server, stopping, dead)
    finally:
        stopping.cancel()
        halt.set()
        if group is not None:
            group.close()
        with contextlib.suppress(OSError):
            sock.close()


def _engine(options: SimOptions, log: VllmLog,
            dead: asyncio.Event) -> tuple[Engine, EngineMetrics]:
    """The engine and the metrics its scheduler reports to; a crash sets `dead`."""
    metrics = EngineMetrics()
    scheduler = Scheduler(
        profile=options.profile,
        max_num_seqs=options.engine_max_num_seqs,
        kv_capacity=options.engine_kv_tokens,
        max_batched_tokens=options.engine_batched_tokens,
        observer=metrics,
    )
    engine = Engine(
        scheduler,
        metrics,
        log,
        time_scale=options.time_scale,
        engine_proc=options.version.engine_process,
        crash_after=options.crash_after_requests,
        hang_after=options.hang_after_requests,
        on_dead=dead.set,
        gpus=GpuMeter(options.profile, options.time_scale) if options.profile.gpu else None,
    )
    return engine, metrics


async def _join_unless_stopped(options: SimOptions, log: VllmLog, halt: threading.Event,
                               stop: asyncio.Event) -> cluster.Group | int:
    """The group, once formed; or the exit code: 0 when stopped first, 1 when it failed."""
    joining = asyncio.create_task(_join(options, log, halt))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({joining, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not joining.done():
        halt.set()
        return 0
    stopping.cancel()
    try:
        return joining.result()
    except cluster.ClusterFailed:
        return 1


def _end_when_lost(group: cluster.Group, log: VllmLog, dead: asyncio.Event) -> None:
    def gone(future: asyncio.Future[str]) -> None:
        if not future.cancelled() and future.result():
            _lost(log, future.result())
            dead.set()  # ends the server like a dead engine: exit 1

    _watch(group).add_done_callback(gone)


async def _run_engine(options: SimOptions, log: VllmLog, engine: Engine, server: HttpServer,
                      stopping: asyncio.Task[Any], dead: asyncio.Event) -> int:
    """Serve until stopped (exit 0), the engine dies (1, after a grace) or a bug ends it (1)."""
    tasks = [asyncio.create_task(engine.run())]
    if options.log_stats:
        tasks.append(asyncio.create_task(engine.log_stats()))
    dying = asyncio.create_task(dead.wait())
    await asyncio.wait({stopping, dying, tasks[0]}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if dead.is_set():
        await asyncio.sleep(CRASH_GRACE_S)
        code = 1
    elif tasks[0].done() and tasks[0].exception() is not None:  # a bug, not an injection
        bug = tasks[0].exception()
        assert bug is not None
        log.error("APIServer", "simulator.py:1",
                  "".join(traceback.format_exception(bug)).rstrip())  # fmt: skip
        code = 1
    for task in (*tasks, dying):
        task.cancel()
    _shutdown_lines(log)
    server.close()
    return code


def main(argv: list[str]) -> int:
    """Entry point of `orch sim serve` and `python -m orchestrator.sim serve`."""
    options = parse_serve_args(argv)
    if options.api_key:
        masking.register(options.api_key)
    try:
        return asyncio.run(serve(options))
    except KeyboardInterrupt:
        return 130
