"""What the service sees of the environment it is started from: BASE_ENV and the plan's env,
nothing else (no AWS keys, no orch variables), over the local transport and over SSH. Real
processes, their /proc/PID/environ read back."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from orchestrator.service.backends import BASE_ENV, ServicePaths, start_command, stop_command
from orchestrator.service.launch import LaunchSpec, render_env_file
from orchestrator.transport.base import Transport

pytestmark = pytest.mark.slow  # servers and orch processes: seconds a test


@pytest.fixture(autouse=True)
def _controller_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unrelated secrets in the controller's environment (the local transport passes it on),
    set before the `transport` fixture connects."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-the-service")
    monkeypatch.setenv("ORCH_API_KEY", "sk-mapped-only-as-VLLM_API_KEY")


def test_the_service_gets_the_base_and_the_plans_env_only(transport: Transport, tmp_path: Path) -> None:
    spec = LaunchSpec(engine="vllm", model="m", argv=["/bin/sleep", "30"],
                      env={"NCCL_P2P_LEVEL": "SYS", "VLLM_API_KEY": "${env:ORCH_API_KEY}"},
                      secret_env_names=frozenset({"VLLM_API_KEY"}), workdir=str(tmp_path),
                      host="127.0.0.1", port=8000)
    paths = ServicePaths.for_venv(str(tmp_path), "svc")
    Path(paths.state_dir).mkdir(parents=True)
    env_text = render_env_file(spec, {"ORCH_API_KEY": os.environ["ORCH_API_KEY"]})
    transport.put(env_text.encode(), paths.env_file, mode=0o600)
    transport.run(start_command("process", spec, paths))
    try:
        pid = int(Path(paths.pidfile).read_text().split()[0])
        deadline = time.monotonic() + 5
        # Until the shell that reads the env file has exec'd the server (its environ is set
        # at exec): argv[0] is then the server's.
        while (Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != b"/bin/sleep"
               and time.monotonic() < deadline):
            time.sleep(0.02)
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        environ = dict(item.decode().split("=", 1) for item in raw if item)
    finally:
        transport.run(stop_command("process", paths, engine="vllm", timeout_s=2))
    assert environ["NCCL_P2P_LEVEL"] == "SYS"
    assert environ["VLLM_API_KEY"] == "sk-mapped-only-as-VLLM_API_KEY"
    assert "AWS_SECRET_ACCESS_KEY" not in environ and "ORCH_API_KEY" not in environ
    # The shell that reads the env file may add PWD (and SHLVL, `_`); nothing else appears.
    extra = set(environ) - set(BASE_ENV) - {"NCCL_P2P_LEVEL", "VLLM_API_KEY", "PWD", "SHLVL", "_"}
    assert extra == set(), extra
    assert "PATH" in environ
