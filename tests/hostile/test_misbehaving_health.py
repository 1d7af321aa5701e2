"""A server whose /health or /v1/models misbehaves (garbage, silence, a trickle, a body
without end): the readiness check orch waits on gets a bounded answer, said in words, within
about its request timeout; never a hang, never unbounded memory, never a traceback.
Real HTTP on loopback (tests/fixtures/hostile_server.py), orch's own client."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fixtures.hostile_server import Misbehaviour, hostile_server
from fixtures.orchcli import orch

from orchestrator.server_client import ServerClient

pytestmark = pytest.mark.slow

TIMEOUT = 1.0


@pytest.mark.parametrize(("fault", "said"), [
    ("endless-body", "did not finish its answer within|answered more than"),  # whichever first
    ("endless-line", "answered more than 1,048,576 bytes"),  # 64 KiB pieces: the size does
    ("slow", f"did not finish its answer within {TIMEOUT:g} s"),
    ("silent", "ReadTimeout"),
    ("close", "RemoteProtocolError"),
    ("not-http", "RemoteProtocolError"),
    ("status-500", "/health answered 500"),
])
def test_a_misbehaving_health_is_a_bounded_not_ready(fault: str, said: str) -> None:
    with hostile_server(Misbehaviour(health=fault)) as url, \
            ServerClient(url, timeout=TIMEOUT) as client:
        started = time.monotonic()
        ready, missing = client.ready("m")
        took = time.monotonic() - started
    assert not ready
    assert any(one in missing for one in said.split("|")), missing
    assert took < 3 * TIMEOUT + 1, took


@pytest.mark.parametrize(("fault", "said"), [
    ("endless-line", "answered more than 1,048,576 bytes"),
    ("slow", f"did not finish its answer within {TIMEOUT:g} s"),
    ("html", "does not list 'm' yet (200: [])"),
    ("binary", "does not list 'm' yet (200: [])"),
])
def test_a_misbehaving_model_list_is_a_bounded_not_ready(fault: str, said: str) -> None:
    with hostile_server(Misbehaviour(models=fault)) as url, \
            ServerClient(url, timeout=TIMEOUT) as client:
        ready, missing = client.ready("m")
    assert not ready and said in missing, missing


def test_a_good_server_is_still_ready() -> None:
    with hostile_server(Misbehaviour()) as url, ServerClient(url, timeout=TIMEOUT) as client:
        assert client.ready("m") == (True, "ready")


def test_bench_at_a_model_list_without_end_says_so(tmp_path: Path) -> None:
    with hostile_server(Misbehaviour(models="endless-line")) as url:
        started = time.monotonic()
        result = orch("bench", "--url", url, "--concurrency", "1", "--requests", "1",
                      "--result-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=120)
        took = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert "/v1/models answered more than 1,048,576 bytes" in " ".join(output.split()), output
    assert took < 60, took
