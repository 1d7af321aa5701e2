"""Signals end a run (and `orch logs --follow`) as an interrupt; an ssh config an inventory names runs no command on the
controller; durations on the command line read like those of a plan. Real processes."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import orch, write_inventory
from fixtures.sshd import SshServer


@pytest.mark.slow
def test_sighup_ends_an_apply_as_an_interrupt(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "hup", "hosts": "localhost", "commands": [
        {"name": "wait", "run": ["sleep", "30"], "when": "before_launch"}]}))
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "apply", str(plan)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 30
    while not list((tmp_path / "runs").glob("hup/*/meta.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # into the command
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 129, out + err
    assert "Traceback" not in out + err and "interrupted (SIGHUP)" in err
    meta = json.loads(next((tmp_path / "runs").glob("hup/*/meta.json")).read_text())
    assert meta["status"] == "interrupted"


_FINALISER = """
import signal, sys, time
from orchestrator import cli

class Slow:
    def __del__(self) -> None:  # as asyncio's WeakSet callback, caught mid-way by a signal
        print("in the finaliser", flush=True)
        time.sleep(30)

cli.take_signals()
try:
    thing = Slow()
    del thing
    print("after the finaliser", flush=True)
    time.sleep(30)
    sys.exit(0)
except KeyboardInterrupt as stopped:  # Ctrl-C's is Python's own KeyboardInterrupt
    sys.exit(128 + getattr(stopped, "signum", signal.SIGINT))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_that_lands_in_a_finaliser_still_ends_the_run(signum: int) -> None:
    """Python prints an exception raised in a finaliser as "Exception ignored" and goes on:
    a sweep once ran to its end after a SIGHUP landed in asyncio's WeakSet callback."""
    child = subprocess.Popen([sys.executable, "-c", _FINALISER], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "in the finaliser\n"
    child.send_signal(signum)
    out, err = child.communicate(timeout=20)
    assert child.returncode == 128 + signum, out + err
    assert "Exception ignored" not in err and "Traceback" not in err, err


def test_an_inventory_named_ssh_config_runs_no_command(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    (tmp_path / "evil_config").write_text(f"Host *\n  ProxyCommand touch {marker}\n")
    (tmp_path / "i.yaml").write_text(
        "hosts: {a: {address: 127.0.0.1, port: 1}}\n"
        "ssh: {config: evil_config, known_hosts: false, connect_retries: 0}\n")
    (tmp_path / "p.yaml").write_text(
        "name: ok\nhosts: a\nfiles: [{path: /tmp/orch-corpus-x, content: x}]\n")
    result = orch("plan", "p.yaml", "-i", "i.yaml", cwd=tmp_path, timeout=60)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1 and "Traceback" not in said, said
    assert "evil_config:2: ProxyCommand in an ssh config named by the inventory" in said
    assert not marker.exists()


def test_a_bare_number_is_a_duration_in_seconds_on_the_command_line(tmp_path: Path) -> None:
    """`orch bench --timeout 5` was refused as "expected a duration" though its help shows
    `default 600.0`."""
    result = orch("bench", "--url", "http://127.0.0.1:1", "--timeout", "5", cwd=tmp_path)
    said = result.stdout + result.stderr
    assert "expected a duration" not in said and "cannot reach" in said, said


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A simulator service applied to this machine by `orch apply` (process backend): the
    plan file and the service's log."""
    folder = tmp_path_factory.mktemp("follow")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    name = f"follow-{folder.name[-8:]}"
    plan = folder / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "follow", "hosts": "localhost",
        "python": {"venv": str(folder / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "moonshotai/Kimi-K2.5", "served_model_name": "kimi",
                    "host": "127.0.0.1", "port": port, "backend": "process", "name": name,
                    "sim": {"time_scale": 0.003}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"}, "smoke": []}))
    applied = orch("apply", plan, cwd=folder, timeout=300)
    try:
        assert applied.returncode == 0, applied.stdout + applied.stderr
        yield plan, folder / "venv" / ".orch" / "service" / name / "service.log"
    finally:
        orch("stop", plan, cwd=folder, timeout=120)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                              (signal.SIGINT, 0)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
@pytest.mark.slow
def test_a_signal_ends_logs_follow_with_its_code(served: tuple[Path, Path], signum: int,
                                                 code: int) -> None:
    """`orch logs --follow` on a running service: SIGTERM and SIGHUP end it with 143 and 129
    (`timeout`, a closed ssh session: a script must see it was stopped), Ctrl-C with 0 (how a
    user stops following)."""
    plan, log = served
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "logs", str(plan), "--follow", "-n", "5"],
        cwd=plan.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        # New lines, as the server would write them, until --follow shows them: the first
        # may come in the tail (written before orch read it), the second, written after the
        # first came out, can only come from following.
        for marker in (f"orch-follow-tail-{signum}", f"orch-follow-new-{signum}"):
            _write_until_shown(log, marker, lines)
        assert process.poll() is None  # still following
        process.send_signal(signum)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=10)
    out = "".join(lines.queue)
    err = process.stderr.read() if process.stderr else ""
    assert process.returncode == code, out + err
    assert "Traceback" not in out + err
    if code:
        assert f"interrupted ({signal.Signals(signum).name})" in err, err


def _write_until_shown(log: Path, marker: str, lines: queue.Queue[str]) -> None:
    """Append `marker` to the service log until a line of `lines` shows it (a line written
    after orch took the tail but before --follow read the log's size is never shown)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with log.open("a") as service_log:
            service_log.write(f"{marker}\n")
        with contextlib.suppress(queue.Empty):
            while marker not in lines.get(timeout=1.5):
                pass
            return
    raise AssertionError(f"{marker} never came through orch logs --follow")


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


@pytest.mark.parametrize("client", ["paramiko", "auto"])
def test_ctrl_c_of_the_whole_process_group_ends_an_ssh_apply_as_an_interrupt(
        tmp_path: Path, sshd: SshServer, client: str) -> None:
    """A terminal's Ctrl-C reaches every process of the group, the `ssh` children of the
    OpenSSH client (auto's choice here) too: the run still ends as an interrupt (130, the
    run folder marked), and the host's lock is free for the next apply."""
    write_inventory(tmp_path / "i.yaml", sshd.inventory(1, ssh=sshd.ssh_settings(transport=client)))
    started = tmp_path / "started"
    plan = tmp_path / "p.yaml"
    plan.write_text(yaml.safe_dump({"name": "cc", "hosts": "h1", "commands": [
        {"name": "wait", "run": ["sh", "-c", f"touch {started}; exec sleep 20"],
         "when": "before_launch"}]}))
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "apply", str(plan),
                                "-i", "i.yaml"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not started.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), process.communicate(timeout=30)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert "Traceback" not in out + err and "interrupted (SIGINT)" in err
    meta = json.loads(next((tmp_path / "runs").glob("cc/*/meta.json")).read_text())
    assert meta["status"] == "interrupted"
    plan.write_text(yaml.safe_dump({"name": "cc", "hosts": "h1", "commands": [
        {"name": "wait", "run": ["true"], "when": "before_launch"}]}))
    again = orch("apply", plan, "-i", "i.yaml", cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
