"""Run the simulator as a real subprocess, for tests of every part of orch.

    from orchestrator.sim.testing import running_simulator

    with running_simulator(profile="instant", reasoning_parser="kimi_k2") as sim:
        httpx.get(sim.url("/health"))            # http://127.0.0.1:<port>/health
        openai.OpenAI(base_url=sim.api_base, api_key="x")
        sim.log()                                # everything it printed so far

Keyword options become `orch sim serve` flags: `max_num_seqs=4` -> `--max-num-seqs 4`,
`trust_remote_code=True` -> `--trust-remote-code` (False/None are left out), a list repeats
the values after one flag (`served_model_name=["a", "b"]`). `extra_args` are appended
verbatim. The process listens on 127.0.0.1 on a free port; the context manager returns once
`GET /health` answers 200 and stops the process (SIGTERM, then SIGKILL) on exit.

`start_simulator()` is the same without waiting for readiness (for start-up failures):
call `.wait_ready()` or `.wait_exit()` on what it returns, and `.stop()` when done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.errors import StartupFailed, StartupTimeout

DEFAULT_MODEL = "moonshotai/Kimi-K2.5"
DEFAULT_TIME_SCALE = 0.001  # a 13-minute start takes under a second


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _reserved_port() -> socket.socket:
    """A port held for a simulator until it is ready: bound (never listening, so it takes no
    connection) with SO_REUSEPORT as the simulator binds, so that the simulator may bind it
    too while no other bind is given it meanwhile. A port free_port() found could be taken
    in between, and two simulators on one port would share its connections."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def serve_command(model: str, port: int, extra_args: Sequence[str] = (), **options: object) -> list[str]:
    """The argv that runs `orch sim serve` with these options on 127.0.0.1:port."""
    argv = [sys.executable, "-m", "orchestrator.sim", "serve", model]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv + list(extra_args)


@dataclass
class SimulatorProcess:
    """A simulator subprocess and where to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    argv: list[str] = field(default_factory=list)
    held: socket.socket | None = None  # the port's reservation, let go once ready or stopped

    def _let_go(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, path: str) -> str:
        return self.base_url + path

    def log(self) -> str:
        """Everything the process printed so far (stdout and stderr)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def health_status(self) -> int | None:
        """HTTP status of GET /health, or None when the connection is refused."""
        try:
            with urllib.request.urlopen(self.url("/health"), timeout=2) as response:
                status: int = response.status
                return status
        except urllib.error.HTTPError as error:
            return error.code
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StartupFailed(
                    f"the simulator exited with code {self.process.returncode} during start-up:\n"
                    + "\n".join(self.log().splitlines()[-20:])
                )
            if self.health_status() == 200:
                self._let_go()
                return
            time.sleep(0.02)
        raise StartupTimeout(f"the simulator was not ready within {timeout} s:\n" + self.log()[-3000:])

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        self._let_go()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        return self.process.returncode


def start_simulator(
    model: str = DEFAULT_MODEL,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    extra_args: Sequence[str] = (),
    log_dir: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    port: int | None = None,
    **options: object,
) -> SimulatorProcess:
    """Start `orch sim serve` in the background (see the module docstring)."""
    return _start(model, time_scale, extra_args, log_dir, env, port, options)


def _start(
    model: str,
    time_scale: float,
    extra_args: Sequence[str],
    log_dir: str | os.PathLike[str] | None,
    env: dict[str, str] | None,
    port: int | None,
    options: dict[str, object],
) -> SimulatorProcess:
    held = None
    if not port:
        held = _reserved_port()
        port = int(held.getsockname()[1])
    argv = serve_command(model, port, extra_args, time_scale=time_scale, **options)
    directory = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="orch-sim-"))
    log_path = directory / f"sim-{port}.log"
    root = str(Path(__file__).resolve().parents[2])
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, child_env.get("PYTHONPATH")]))
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_env
        )
    return SimulatorProcess(process, port, log_path, argv, held)


@contextlib.contextmanager
def running_simulator(
    model: str = DEFAULT_MODEL,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    startup_timeout: float = 30.0,
    extra_args: Sequence[str] = (),
    log_dir: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    **options: object,
) -> Iterator[SimulatorProcess]:
    """A ready simulator on 127.0.0.1 (see the module docstring); stopped on exit."""
    sim = _start(model, time_scale, extra_args, log_dir, env, None, options)
    try:
        sim.wait_ready(startup_timeout)
        yield sim
    finally:
        sim.stop()


@dataclass(frozen=True)
class RawResult:
    """One request of `raw_batch`: what came back and when (monotonic seconds)."""

    status: int
    body: bytes  # the whole body (de-chunked is not needed: see `events`)
    events: int  # SSE events (`data: ` lines) seen, [DONE] included
    started: float
    first_event: float | None
    finished: float


async def _raw_request(
    host: str, port: int, path: str, payload: bytes, connected: Callable[[], Awaitable[None]]
) -> RawResult:
    reader, writer = await asyncio.open_connection(host, port)
    await connected()  # every connection is open before any request is sent
    started = time.monotonic()
    writer.write(
        b"POST %b HTTP/1.1\r\nhost: %b\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%b"
        % (path.encode(), host.encode(), len(payload), payload)
    )
    parts: list[bytes] = []
    events = 0
    first: float | None = None
    tail = b""
    while True:
        data = await reader.read(1 << 16)
        if not data:
            break
        window = tail + data
        found = window.count(b"data: ")
        if found and first is None:
            first = time.monotonic()
        events += found
        tail = data[-5:]
        parts.append(data)
    finished = time.monotonic()
    writer.close()
    raw = b"".join(parts)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return RawResult(status, body, events, started, first, finished)


async def raw_batch(
    base_url: str, body: dict[str, object], concurrency: int, path: str = "/v1/chat/completions"
) -> list[RawResult]:
    """`concurrency` identical requests at once over plain sockets (a client that costs little
    CPU, so that throughput measurements measure the server). One connection per request;
    all connections are opened first, then every request is sent at once."""
    url = urlsplit(base_url)
    payload = json.dumps(body).encode()
    host, port = url.hostname or "127.0.0.1", url.port or 80
    ready = asyncio.Event()
    pending = concurrency

    async def connected() -> None:
        nonlocal pending
        pending -= 1
        if pending == 0:
            ready.set()
        await ready.wait()

    requests = (_raw_request(host, port, path, payload, connected) for _ in range(concurrency))
    return list(await asyncio.gather(*requests))
