"""`orch sim serve` from the command line: help, bad input, vLLM's flags, the start-up log,
graceful shutdown."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import zygote
from fixtures.health import wait_healthy

from orchestrator.sim.testing import free_port, running_simulator, start_simulator

ROOT = Path(__file__).resolve().parents[2]


def orch(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run([*args], timeout=30, cwd=ROOT)


def test_help_and_bad_input() -> None:
    shown = orch("sim", "serve", "--help")
    assert shown.returncode == 0
    assert shown.stdout.startswith("usage: orch sim serve")
    assert "--time-scale" in shown.stdout and "--fail-at-startup" in shown.stdout
    missing = orch("sim", "serve")
    assert missing.returncode == 2 and "a model is required" in missing.stderr
    bad = orch("sim", "serve", "m", "--time-scale", "-1")
    assert bad.returncode == 2
    assert "argument --time-scale: expected a number greater than 0, got '-1'" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert orch("sim").returncode == 64  # orch usage; `orch sim serve` exits 2 as vllm serve does
    module = subprocess.run([sys.executable, "-m", "orchestrator.sim"], capture_output=True, text=True,
                            timeout=30, cwd=ROOT)  # fmt: skip
    assert module.returncode == 2 and "usage: python -m orchestrator.sim serve" in module.stdout


def test_orch_sim_serve_takes_vllm_flags(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "sim.log"
    argv = ["sim", "serve", "moonshotai/Kimi-K2.5", "--host", "127.0.0.1", "--port", str(port),
            "--profile", "instant", "--tensor-parallel-size", "8", "--trust-remote-code",
            "--kv-cache-dtype", "fp8", "--compilation-config", '{"cudagraph_mode": "PIECEWISE"}',
            "--enable-auto-tool-choice", "--tool-call-parser", "kimi_k2"]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *argv], stdout=out,
                                   stderr=subprocess.STDOUT, cwd=ROOT)  # fmt: skip
    try:
        wait_healthy(process, f"http://127.0.0.1:{port}", log, name="orch sim serve",
                     budget_s=30, every_s=0.05)
        text = log.read_text()
        for flag in ("--tensor-parallel-size 8", "--trust-remote-code",
                     '--compilation-config {"cudagraph_mode": "PIECEWISE"}', "--tool-call-parser kimi_k2"):
            assert f"Ignoring vLLM flag {flag} (not modelled by the simulator)" in text
        assert "'tensor_parallel_size': 8" in text  # non-default args, as vLLM prints them
        assert "Ignoring vLLM flag --kv-cache-dtype" not in text  # modelled: it sizes the cache
        assert "'kv_cache_dtype': 'fp8'" in text and "kv_cache_dtype=fp8," in text
        assert "(Worker_TP7 pid=" in text  # the flag still shapes the log
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


MARKERS_017 = [
    "orch simulator: this is not vLLM",
    # vLLM's default banner: its logo, as real 0.17.1 prints it into a log file.
    "[utils.py:302]        █     █     █▄   ▄█",
    "[utils.py:302]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.17.1",
    "[utils.py:302]   █▄█▀ █     █     █     █  model   moonshotai/Kimi-K2.5",
    "[utils.py:302]    ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
    "[utils.py:238] non-default args: {",
    "Resolved architecture: KimiK25ForConditionalGeneration",
    "Using max model len 262144",
    "Initializing a V1 LLM engine (v0.17.1) with config: model='moonshotai/Kimi-K2.5'",
    "world_size=8, local_world_size=8",
    "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs.",
    "Using TRITON_MLA attention backend out of potential backends: ['TRITON_MLA'].",
    "Starting to load model moonshotai/Kimi-K2.5...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/119 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 119/119 [",
    "Loading weights took ",
    "Model loading took 71.2 GiB memory and ",
    "Dynamo bytecode transform time: ",
    "torch.compile takes ",
    "Available KV cache memory: 15.43 GiB",
    "GPU KV cache size: 449,536 tokens",
    "Maximum concurrency for 262,144 tokens per request: 1.71x",
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%",
    "Graph capturing finished in ",
    "init engine (profile, create kv cache, warmup model) took ",
    "Starting vLLM API server 0 on http://127.0.0.1:",
    "Route: /v1/chat/completions, Methods: POST",
    "INFO:     Started server process [",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
]
SHUTDOWN = [
    "Shutting down FastAPI HTTP server.",
    "INFO:     Shutting down",
    "INFO:     Waiting for application shutdown.",
    "INFO:     Application shutdown complete.",
    "INFO:     Finished server process [",
]


def test_startup_markers_in_order_and_graceful_shutdown() -> None:
    with running_simulator(time_scale=0.0005) as sim:
        pass
    assert sim.process.returncode == 0
    lines = sim.log().splitlines()
    position = 0
    for marker in MARKERS_017 + SHUTDOWN:
        found = next((i for i in range(position, len(lines)) if marker in lines[i]), None)
        assert found is not None, f"{marker!r} missing or out of order"
        position = found
    pid = sim.pid
    assert all(line.startswith("(") and f" pid={pid}) " in line for line in lines)
    assert lines[0].startswith(f"(APIServer pid={pid}) WARNING ")


def test_vllm_disable_log_logo_gives_the_plain_banner() -> None:
    with running_simulator(time_scale=0.0005, env={"VLLM_DISABLE_LOG_LOGO": "1"}) as sim:
        pass
    text = sim.log()
    assert "[utils.py:302] vLLM server version 0.17.1, serving model moonshotai/Kimi-K2.5" in text
    assert "version 0.17.1\n" not in text and "▀▄▀" not in text


def test_a_starting_simulators_port_is_given_to_no_other_bind() -> None:
    """start_simulator() holds the port it picked until the simulator is ready: a bind to it
    in between fails (no other test's server lands there), the simulator binds it all the
    same, and once ready the port is the simulator's alone."""
    sim = start_simulator(profile="instant")
    try:
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", sim.port))
        assert taken.value.errno == errno.EADDRINUSE
        sim.wait_ready()
        assert sim.held is None and sim.health_status() == 200
    finally:
        sim.stop()
