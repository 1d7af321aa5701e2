"""`bench.via: ssh`: a sweep through a real SSH local port forward (the shared sshd fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.sshd import SshServer
from stream_server import running_stream_server

from orchestrator.bench.reach import bench_url
from orchestrator.bench.sweep import run_sweep
from orchestrator.errors import BenchError
from orchestrator.plan.models import Bench
from orchestrator.transport import connect


def test_direct_urls() -> None:
    with bench_url("10.0.0.5", 8000) as url:
        assert url == "http://10.0.0.5:8000"
    with bench_url("fd00::5", 8000) as url:
        assert url == "http://[fd00::5]:8000"


def test_ssh_without_a_connection_is_a_clear_error() -> None:
    with pytest.raises(BenchError, match="no connection"), bench_url("h", 1, via="ssh"):
        pass


def test_a_sweep_through_an_ssh_port_forward(sshd: SshServer, tmp_path: Path) -> None:
    transport = connect("h1", sshd.inventory(1))
    try:
        with running_stream_server("--tokens", "16") as direct:
            port = int(direct.rsplit(":", 1)[1])
            with bench_url("h1", port, via="ssh", transport=transport) as url:
                assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{port}")
                config = Bench(concurrency=[4], requests_per_level=8, max_tokens=16)
                run_sweep(config, base_url=url, model=None, api_key=None, out_dir=tmp_path)
    finally:
        transport.close()
    c4 = json.loads((tmp_path / "level-c4.json").read_text())
    assert (c4["completed"], c4["failed"], c4["total_output_tokens"]) == (8, 0, 128)
