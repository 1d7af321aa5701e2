"""Deadlines and bounds of every HTTP request orch makes, against real servers on 127.0.0.1
that drip their answer a byte at a time or never end it (tests/fixtures/hostile_server.py):
the benchmark's look at the server and its load generator, readiness, the smoke chat, the
scrapes of /metrics and of a DCGM exporter. Each ends within its timeout and a few seconds,
whatever the server does, and keeps a bounded part of what it sent: the bounds are checked
on what is kept (the text, the reason), not on the process's memory."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from fixtures.hostile_server import Misbehaviour, hostile_server
from fixtures.orchcli import orch

from orchestrator.bench.client import StreamClient
from orchestrator.bench.dcgm import not_serving
from orchestrator.bench.http_stream import TEXT_CAP, parse_target
from orchestrator.bench.request_record import RequestRecord
from orchestrator.server_client import MAX_TEXT, ServerClient

pytestmark = pytest.mark.slow  # servers and orch processes: seconds a test

SLACK = 5.0  # what a loaded machine may add to a deadline
USAGE = {"prompt_tokens": 3, "completion_tokens": 5}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True}


def _bench(tmp_path: Path, how: Misbehaviour, timeout: int) -> tuple[int, str, float]:
    with hostile_server(how) as url:
        started = time.monotonic()
        result = orch("bench", "--url", url, "--concurrency", "1", "--requests", "1",
                      "--warmup", "0", "--no-metrics", "--timeout", str(timeout),
                      "--result-dir", tmp_path / "out", cwd=tmp_path, timeout=120)
        took = time.monotonic() - started
    said = " ".join((result.stdout + result.stderr).split())
    assert "Traceback" not in said, said
    return result.returncode, said, took


def test_bench_at_a_model_list_dripped_a_byte_at_a_time_ends_at_its_timeout(
        tmp_path: Path) -> None:
    code, said, took = _bench(tmp_path, Misbehaviour(models="drip"), timeout=3)
    assert code == 1, said
    assert "/v1/models: ReadTimeout: no complete answer within 3 s" in said
    assert took < 3 + SLACK, took


@pytest.mark.parametrize(("fault", "reason"), [
    ("drip", "no complete answer within 3 s"),
    ("endless-event", "an SSE event longer than 1 MiB (read no further)"),
    ("endless-events", "more than 500,000 text chunks in one answer (read no further)"),
])
def test_a_completion_without_end_fails_within_its_bounds(tmp_path: Path, fault: str,
                                                           reason: str) -> None:
    code, said, took = _bench(tmp_path, Misbehaviour(usage=USAGE, completions=fault), timeout=3)
    assert code == 1, said
    assert f"the server said: {reason}" in said
    assert took < 3 + SLACK, took


def test_the_text_kept_for_a_tokenizer_is_bounded() -> None:
    """64 KiB of text an event, without end: the request fails at TEXT_CAP, its text dropped."""
    async def send(url: str) -> RequestRecord:
        client = StreamClient(parse_target(url), "/v1/chat/completions", keep_text=True,
                              timeout=30)
        record = RequestRecord(str(uuid.uuid4()))
        await client.send(b"{}", record)
        client.close()
        return record

    with hostile_server(Misbehaviour(completions="endless-text")) as url:
        started = time.monotonic()
        record = asyncio.run(send(url))
        took = time.monotonic() - started
    assert record.error_message == (f"more than {TEXT_CAP >> 20} MiB of text in one answer "
                                    "(read no further)")
    assert record.text_raw is None and record.reasoning_raw is None
    assert len(record.token_ns) <= TEXT_CAP // 65536 + 64  # read no further than the bound
    assert took < 30, took


def test_readiness_at_a_dripping_health_ends_at_its_timeout() -> None:
    with hostile_server(Misbehaviour(health="drip", drip_s=0.2)) as url, \
            ServerClient(url, timeout=1.0) as client:
        started = time.monotonic()
        ready, missing = client.ready("m")
        took = time.monotonic() - started
    assert not ready and missing == "ReadTimeout", missing
    assert took < 1 + SLACK, took


@pytest.mark.parametrize(("fault", "error"), [
    ("drip", "no complete answer within 2 s"),
    ("endless-event", "a line of the stream is longer than 1 MiB (read no further)"),
    ("endless-text", f"its text passed {MAX_TEXT:,} characters (read no further; the first "
                     f"{MAX_TEXT:,} kept)"),
])
def test_a_smoke_chat_without_end_is_bounded(fault: str, error: str) -> None:
    with hostile_server(Misbehaviour(completions=fault, drip_s=0.2)) as url, \
            ServerClient(url, timeout=2.0) as client:
        started = time.monotonic()
        answer = client.stream_chat(CHAT, timeout=2.0)
        took = time.monotonic() - started
    assert answer.error == error
    assert len(answer.content) <= MAX_TEXT
    assert took < 2 + SLACK, took


def test_a_dcgm_exporter_dripping_its_header_is_said_within_its_bound() -> None:
    with hostile_server(Misbehaviour(metrics="drip", drip_s=0.2)) as root:
        started = time.monotonic()
        problem, nobody = not_serving(f"{root}/metrics")
        took = time.monotonic() - started
    assert problem == "no whole answer within 2 s (read no further)" and not nobody
    assert took < 2 + SLACK, took
