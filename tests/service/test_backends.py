"""The backends' shell commands, run for real by a local shell: pid ownership, stop markers
and byte-exact log reading."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from orchestrator.service.backends import ServicePaths, stop_command, watch_command
from orchestrator.service.readiness import parse_watch
from orchestrator.transport.local import LocalTransport


def test_log_reading_is_byte_exact_across_polls(tmp_path: Path) -> None:
    paths = ServicePaths.for_venv(str(tmp_path), "svc")
    Path(paths.state_dir).mkdir(parents=True)
    first = b"INFO bad byte \xff here, then half a character \xe2\x82"
    Path(paths.log).write_bytes(first)
    local = LocalTransport("local")
    state, chunk = parse_watch(local.run(watch_command("process", paths, 0)).stdout)
    assert (state, chunk) == ("dead", first)
    with open(paths.log, "ab") as log:
        log.write(b"\xac and on.\nStarting to load model m...\n")
    _, rest = parse_watch(local.run(watch_command("process", paths, len(chunk))).stdout)
    assert rest == b"\xac and on.\nStarting to load model m...\n"
    assert (chunk + rest).decode("utf-8", errors="replace").count("€") == 1


def test_a_reused_pid_is_neither_alive_nor_signalled(tmp_path: Path) -> None:
    paths = ServicePaths.for_venv(str(tmp_path), "svc")
    Path(paths.state_dir).mkdir(parents=True)
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        # The pidfile names the stranger's pid with another start time: a reused pid.
        Path(paths.pidfile).write_text(f"{stranger.pid} 1\n")
        local = LocalTransport("local")
        state, _ = parse_watch(local.run(watch_command("process", paths, 0)).stdout)
        assert state == "stopped" or state == "dead"
        local.run(stop_command("process", paths, engine="vllm", timeout_s=1))
        time.sleep(0.2)
        assert stranger.poll() is None  # still running: never signalled
        assert Path(paths.stopped_marker).exists()
        state, _ = parse_watch(local.run(watch_command("process", paths, 0)).stdout)
        assert state == "stopped"
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.slow
def test_stop_kills_the_group_it_started_even_when_the_leader_is_gone(tmp_path: Path) -> None:
    paths = ServicePaths.for_venv(str(tmp_path), "svc")
    Path(paths.state_dir).mkdir(parents=True)
    # A leader that starts a worker and dies, like an API server leaving engine workers behind.
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & echo $! > worker; exit 0"],
                              cwd=tmp_path, start_new_session=True)
    leader.wait()
    worker = int((tmp_path / "worker").read_text())
    stat = Path(f"/proc/{leader.pid}/stat")
    assert not stat.exists()
    Path(paths.pidfile).write_text(f"{leader.pid} 12345\n")
    LocalTransport("local").run(stop_command("process", paths, engine="vllm", timeout_s=2))
    deadline = time.monotonic() + 5
    while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    status = Path(f"/proc/{worker}/stat").read_text().split(") ")[1][0] if Path(f"/proc/{worker}").exists() else "gone"
    assert status in ("gone", "Z")


@pytest.mark.slow
def test_what_a_dead_leader_left_of_its_group_is_seen_then_stopped(tmp_path: Path) -> None:
    """vLLM's API server SIGKILLed leaves its EngineCore and workers alive in its process
    group (reparented to init): the probe names them, status says so, stop ends them."""
    from orchestrator.facts import ProbeRequest, probe
    from orchestrator.plan.models import ServiceSpec
    from orchestrator.service.backends import describe_survivors
    from orchestrator.service.step import service_request

    paths = ServicePaths.for_venv(str(tmp_path), "svc")
    Path(paths.state_dir).mkdir(parents=True)
    leader = subprocess.Popen(["sh", "-c", "bash -c 'exec -a VLLM::Worker sleep 30' & "
                               "echo $! > worker; exit 0"], cwd=tmp_path, start_new_session=True)
    leader.wait()
    worker = int((tmp_path / "worker").read_text())
    Path(paths.pidfile).write_text(f"{leader.pid} 12345\n")
    service = ServiceSpec(model="m", engine="sim", port=1, name="svc")
    transport = LocalTransport("local")
    try:
        facts = probe(transport, ProbeRequest(service=service_request(paths, service)))
        assert facts.service is not None and facts.service.process is None
        assert [(p.pid, p.cmdline[:1]) for p in facts.service.survivors] == [
            (worker, ("VLLM::Worker",))]
        assert describe_survivors(facts.service.survivors) == \
            f"1 process of its group live on: pid {worker} VLLM::Worker"
        transport.run(stop_command("process", paths, engine="vllm", timeout_s=1))
        # the stop returned once nothing of the group remained
        assert not Path(f"/proc/{worker}").exists() or \
            Path(f"/proc/{worker}/stat").read_text().split(") ")[1][0] == "Z"
        again = probe(transport, ProbeRequest(service=service_request(paths, service)))
        assert again.service is not None and again.service.survivors == ()
    finally:
        subprocess.run(["kill", "-9", str(worker)], capture_output=True)


@pytest.mark.slow
def test_stop_ends_the_whole_session_even_what_left_its_group(tmp_path: Path) -> None:
    """A Ray node's `ray::IDLE` worker makes a process group of its own: the group kill misses
    it, the session does not (the service was started with setsid)."""
    paths = ServicePaths.for_venv(str(tmp_path), "svc")
    Path(paths.state_dir).mkdir(parents=True)
    leader = subprocess.Popen(
        ["sh", "-c", "python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(60)' & "
                     "echo $! > worker; exec sleep 60"], cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 5
    while not (tmp_path / "worker").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the worker has left the group
    worker = int((tmp_path / "worker").read_text())
    start = Path(f"/proc/{leader.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    Path(paths.pidfile).write_text(f"{leader.pid} {start}\n")
    try:
        LocalTransport("local").run(stop_command("process", paths, engine="vllm", timeout_s=1))
        leader.wait(timeout=5)
        gone = not Path(f"/proc/{worker}").exists() or \
            Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert gone, "the worker that left the group outlived the stop"
    finally:
        subprocess.run(["kill", "-9", str(worker)], capture_output=True)


def test_a_stop_only_if_present_leaves_an_absent_unit_absent_and_stops_a_present_one(
        tmp_path: Path) -> None:
    local = LocalTransport("local")
    absent = ServicePaths.for_venv(str(tmp_path / "old-venv"), "svc-ray")
    for backend in ("process", "systemd"):
        local.run(stop_command(backend, absent, engine="ray", only_if_present=True))
    assert not (tmp_path / "old-venv").exists()  # no state folder, no stop marker made
    present = ServicePaths.for_venv(str(tmp_path), "svc-ray")
    Path(present.state_dir).mkdir(parents=True)
    node = subprocess.Popen(["sleep", "30"], start_new_session=True)
    start = Path(f"/proc/{node.pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
    Path(present.pidfile).write_text(f"{node.pid} {start}\n")
    reaper = threading.Thread(target=node.wait)  # reaped at once: no zombie left to wait on
    reaper.start()
    local.run(stop_command("process", present, engine="ray", timeout_s=2, only_if_present=True))
    reaper.join(timeout=10)
    assert node.returncode == -15  # SIGTERM, a Ray node's stop signal
    assert Path(present.stopped_marker).exists() and not Path(present.pidfile).exists()
