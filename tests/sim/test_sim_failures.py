"""Failure injection: start-up crashes with vLLM's exact texts after the phases that precede
them, a port that is really taken, an engine that dies or hangs mid-request, a slow start."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from orchestrator.sim import failures
from orchestrator.sim.testing import SimulatorProcess, free_port, running_simulator, start_simulator

pytestmark = pytest.mark.slow

WRAPPED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"

# kind -> (root cause, lines that must be there, lines that must not)
STARTUP = {
    "flashinfer-mismatch": (failures.FLASHINFER_MISMATCH, ["Starting to load model", WRAPPED],
                            ["Loading safetensors checkpoint shards"]),
    "cuda-oom": (failures.CUDA_OOM, ["Loading safetensors checkpoint shards:  60% Completed",
                                     "Failed to load model - not enough GPU memory.", WRAPPED],
                 ["Loading weights took"]),
    "kv-cache": (failures.NO_KV_MEMORY, ["torch.compile takes", WRAPPED], ["GPU KV cache size"]),
    "nccl": (failures.NCCL_ERROR, ["world_size=8 rank=7", "WorkerProc failed to start.", WRAPPED],
             ["Starting to load model"]),
    "trust-remote-code": (failures.TRUST_REMOTE_CODE, ["non-default args"],
                          ["Resolved architecture", "Engine core initialization failed"]),
    "port-in-use": (failures.PORT_IN_USE, ["non-default args"], ["Resolved architecture"]),
}  # fmt: skip


def has_line(log: str, text: str) -> bool:
    """`text` ends a log line, after the process prefix (and the logger prefix, if any)."""
    return any(line.endswith((f") {text}", f"] {text}")) for line in log.splitlines())


def test_startup_failures(tmp_path: Path) -> None:
    sims = {kind: start_simulator(fail_at_startup=kind, tensor_parallel_size=8, log_dir=tmp_path)
            for kind in STARTUP}  # fmt: skip
    # without tensor parallelism the root cause is in the engine core itself
    single = start_simulator(fail_at_startup="kv-cache", profile="instant", log_dir=tmp_path)
    try:
        for kind, sim in sims.items():
            assert sim.wait_exit(timeout=30) == 1, kind
            log = sim.log()
            root, present, absent = STARTUP[kind]
            assert has_line(log, root), kind
            for text in present:
                assert text in log, (kind, text)
            for text in absent:
                assert text not in log, (kind, text)
            assert "Application startup complete." not in log
        assert single.wait_exit(timeout=30) == 1
        log = single.log()
        assert "(EngineCore_DP0 pid=" in log and "WorkerProc" not in log
        assert has_line(log, failures.NO_KV_MEMORY)
    finally:
        for sim in (*sims.values(), single):
            sim.stop()


def test_a_port_that_is_taken_fails_like_vllm(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        sim = start_simulator(port=holder.getsockname()[1], log_dir=tmp_path)
        try:
            assert sim.wait_exit(timeout=30) == 1
        finally:
            sim.stop()
    assert has_line(sim.log(), failures.PORT_IN_USE)


def read_events(response: httpx.Response) -> list[str]:
    return [e for e in response.text.split("\n\n") if e]


def test_crash_after_requests() -> None:
    with running_simulator(profile="instant", reasoning_parser="kimi_k2", crash_after_requests=1) as sim:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}
        assert httpx.post(sim.url("/v1/chat/completions"), json=body).status_code == 200
        response = httpx.post(sim.url("/v1/chat/completions"), json={**body, "stream": True})
        events = read_events(response)
        assert response.status_code == 200  # the stream had started
        assert json.loads(events[0].removeprefix("data: "))["choices"][0]["delta"]["role"] == "assistant"
        assert events[-2:] == [
            'data: {"error": {"message": "EngineCore encountered an issue. See stack trace (above) '
            'for the root cause.", "type": "InternalServerError", "param": null, "code": 500}}',
            "data: [DONE]",
        ]
        assert sim.health_status() == 503
        late = httpx.post(sim.url("/v1/chat/completions"), json=body)
        assert late.status_code == 500 and late.json()["error"]["type"] == "InternalServerError"
        assert sim.wait_exit(timeout=10) == 1
        log = sim.log()
        assert "EngineCore encountered a fatal error." in log
        assert "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client." in log
        assert has_line(log, failures.ILLEGAL_MEMORY_ACCESS)


def test_a_whole_response_in_flight_gets_a_500() -> None:
    with running_simulator(profile="instant", crash_after_requests=0) as sim:
        response = httpx.post(sim.url("/v1/chat/completions"),
                              json={"messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert response.status_code == 500
        assert response.json()["error"]["message"].startswith("EngineCore encountered an issue.")


def test_hang_after_requests() -> None:
    with running_simulator(profile="instant", hang_after_requests=1) as sim:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}
        assert httpx.post(sim.url("/v1/chat/completions"), json=body).status_code == 200
        with httpx.Client(timeout=httpx.Timeout(5.0, read=1.0)) as client, client.stream(
            "POST", sim.url("/v1/chat/completions"), json={**body, "stream": True}
        ) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: {")  # the first token came
            with pytest.raises(httpx.ReadTimeout):
                for _ in lines:
                    pass
        assert sim.health_status() == 200  # a hang is not a crash: health still says yes
        assert "vllm:num_requests_running" in httpx.get(sim.url("/metrics")).text
        assert sim.process.poll() is None


def test_slow_start_refuses_connections_until_ready() -> None:
    sim: SimulatorProcess = start_simulator(profile="instant", slow_start=1.5)
    try:
        started = time.monotonic()
        seen_refused = False
        while sim.health_status() is None and time.monotonic() - started < 20:
            seen_refused = True
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        assert seen_refused and elapsed >= 1.4
        assert sim.health_status() == 200
        took = next(line for line in sim.log().splitlines() if "Loading weights took" in line)
        assert float(took.split("took ")[1].split(" ")[0]) >= 1.5
    finally:
        sim.stop()


def test_free_port_is_free() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
