"""Messages a new user meets in the first hour, through the real CLI: nothing silent, nothing
misleading (issue 32, items 9 and 10). `orch logs` of a service that never ran, a port taken
before the first start, a port that accepts and never speaks SSH, a plan naming a host when
`-i` was forgotten, `bench: null`, piped `orch runs` and `orch diagnose`, and the inventory
`orch init` writes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv, zygote
from fixtures.silent_server import silent_port

from orchestrator.runs.writer import RunFolder
from tests.fixtures.orchcli import orch

ROOT = Path(__file__).resolve().parents[2]
SIM_PLAN = ROOT / "plans" / "sim" / "kimi-nvfp4.yaml"


def _sim_plan(tmp_path: Path, **service: Any) -> Path:
    """A simulator plan on this machine with its own service name and venv (none of it is
    created by the commands of these tests)."""
    plan = {
        "name": "msg", "hosts": "localhost",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "backend": "process",
                    "name": f"msg-{tmp_path.name[-10:]}", "sim": {"profile": "instant"},
                    **service},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _piped(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """orch with stdout a pipe and no COLUMNS: what `orch ... | grep` reads."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return zygote.run([*map(str, args)], cwd=cwd, env=env, timeout=120)


@pytest.mark.slow
def test_logs_of_a_service_that_never_ran_says_so_and_fails(tmp_path: Path) -> None:
    plan = _sim_plan(tmp_path)
    name = f"msg-{tmp_path.name[-10:]}"
    result = orch("logs", plan, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    log = tmp_path / "venv" / ".orch" / "service" / name / "service.log"
    assert result.stderr.startswith(
        f"error: no log: the service {name} has not run on localhost (no {log})\n")
    assert "orch apply" in result.stderr and result.stdout == ""
    followed = orch("logs", plan, "--follow", cwd=tmp_path, timeout=60)  # nothing to follow
    assert followed.returncode == 1 and "no log: the service" in followed.stderr


def test_an_empty_log_is_a_log(tmp_path: Path) -> None:
    """Only a missing file is "never ran": a service that printed nothing yet has a log."""
    plan = _sim_plan(tmp_path)
    state = tmp_path / "venv" / ".orch" / "service" / f"msg-{tmp_path.name[-10:]}"
    state.mkdir(parents=True)
    (state / "service.log").write_text("")
    result = orch("logs", plan, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.fixture
def held_port() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A port another process listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    holder = subprocess.Popen([sys.executable, "-c", "import socket, time; s = socket.create_server("
                               f"('127.0.0.1', {port})); print('up', flush=True); time.sleep(300)"],
                              stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"up\n"
    yield port, holder
    holder.kill()
    holder.wait()


def test_a_port_taken_before_the_first_start_names_the_holder_and_the_launch(
        tmp_path: Path, held_port: tuple[int, subprocess.Popen[bytes]]) -> None:
    port, holder = held_port
    result = orch("plan", _sim_plan(tmp_path, port=port), cwd=tmp_path)
    said = " ".join(result.stdout.split())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "preflight: the launch would fail (1 problem(s) below)" in said
    assert f"port {port} (service.port) is already in use by pid {holder.pid}: " in said
    assert "restart would fail" not in said and "running server is left" not in said


@pytest.fixture(name="silent_port")
def _silent_port() -> Iterator[int]:
    """A TCP server that accepts and never says a word (a hung sshd, an HTTP port)."""
    with silent_port() as port:
        yield port


@pytest.mark.slow
def test_a_host_that_never_speaks_ssh_fails_once_within_its_connect_timeout(
        tmp_path: Path, silent_port: int) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({
        "hosts": {"gpu1": {"address": "127.0.0.1", "port": silent_port, "connect_timeout": 2}},
        "ssh": {"known_hosts": False, "config": False}}))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "silent", "hosts": "gpu1", "commands": [
        {"name": "hello", "run": ["true"]}]}))
    started = time.monotonic()
    result = orch("plan", plan, "-i", inventory, cwd=tmp_path, timeout=60)
    elapsed = time.monotonic() - started
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    message = f"127.0.0.1:{silent_port} accepted the connection but sent no SSH banner within 2 s"
    assert message in said
    assert "retry" not in said and "gave up" not in said and "No existing session" not in said
    assert elapsed < 2 + 6  # one connect_timeout, plus orch's start-up on a busy machine


@pytest.mark.slow
def test_a_host_missing_from_the_built_in_inventory_hints_at_dash_i(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "gpu", "hosts": "gpu1", "commands": [
        {"name": "hello", "run": ["true"]}]}))
    bare = orch("plan", plan, cwd=tmp_path)
    assert bare.returncode == 1
    assert bare.stderr == (
        "error: no host or group named 'gpu1' in the built-in inventory (this machine only: "
        "no -i was given)\n  hint: known: localhost; pass the inventory with -i FILE (`orch "
        "init` writes one under inventory/)\n")
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "gpu.yaml").write_text("hosts: {gpu1: {address: 10.0.0.5}}\n")
    named = orch("plan", plan, cwd=tmp_path)
    assert "hint: known: localhost; pass the inventory with -i inventory/gpu.yaml\n" in named.stderr
    (tmp_path / "inventory" / "lab.ini").write_text("gpu1 ansible_host=10.0.0.5\n")
    two = orch("plan", plan, cwd=tmp_path)
    assert "-i one of inventory/gpu.yaml, inventory/lab.ini\n" in two.stderr
    given = orch("plan", plan, "-i", "inventory/lab.ini", "--set", "hosts=gpu2",
                 cwd=tmp_path)  # an inventory was given: what it knows, no word of -i
    assert "error: no host or group named 'gpu2' in inventory/lab.ini\n" in given.stderr
    assert "hint: known: " in given.stderr and "pass the inventory" not in given.stderr


@pytest.mark.slow
def test_bench_null_is_said_once_by_orch_plan(tmp_path: Path) -> None:
    dropped = orch("plan", SIM_PLAN, "--set", "bench=null", "--set",
                   f"python.venv={tmp_path / 'venv'}", cwd=tmp_path)
    assert dropped.returncode in (0, 2), dropped.stdout + dropped.stderr
    lines = dropped.stdout.splitlines()
    assert lines[1] == "no benchmark: bench is null" and lines.count(lines[1]) == 1
    kept = orch("plan", SIM_PLAN, "--set", f"python.venv={tmp_path / 'venv'}", cwd=tmp_path)
    assert kept.returncode in (0, 2) and "no benchmark" not in kept.stdout


def test_piped_orch_runs_keeps_each_header_on_one_line(tmp_path: Path) -> None:
    folder = RunFolder.create("piped", "0123456789abcdef", root=tmp_path / "runs",
                              hosts=["localhost"], command="apply", plan_file="plan.yaml",
                              layers=["plan.yaml"], engine="sim", simulated=True)
    folder.finish("complete")
    result = _piped("runs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "Plan" in line)
    assert header.split() == ["Plan", "Run", "Status", "Engine", "1", "stream", "Peak", "Hosts"]
    assert not any(line.strip() in ("1", "stream") for line in result.stdout.splitlines())
    on_terminal = orch("runs", cwd=tmp_path)  # COLUMNS=120: a terminal's table, as before
    assert on_terminal.returncode == 0 and "Plan" in on_terminal.stdout


def test_piped_orch_diagnose_is_as_wide_as_its_text(tmp_path: Path) -> None:
    evidence = "OSError: [Errno 98] Address already in use " + "x" * 300
    log = tmp_path / "service.log"
    log.write_text(f"INFO starting\n{evidence}\n")
    result = _piped("diagnose", log, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(evidence in line for line in lines)  # whole, on one line
    assert max(len(line) for line in lines) < len(evidence) + 20  # not a 1,000-column box
    short = tmp_path / "short.log"
    short.write_text("OSError: [Errno 98] Address already in use\n")
    assert max(len(line) for line in _piped("diagnose", short, cwd=tmp_path).stdout.splitlines()) < 120


@pytest.mark.slow
def test_the_inventory_orch_init_writes_names_host_variables_as_a_plan_reads_them(
        tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on: connecting fails fast
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    made = zygote.run(["init", "q", "--host", f"ubuntu@127.0.0.1:{port}", "--model",
                       "Qwen/Qwen3-8B", "--tp", "2"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                      timeout=60)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "inventory" / "q.yaml").read_text()
    assert "vars:  # host variables: a plan reads them as ${host.gpus}" in text
    assert "${vars" not in text
    assert orch("validate", "plans/q.yaml", cwd=tmp_path).returncode == 0
    # The plan reading the variable as the comment says: it resolves from the inventory.
    planned = orch("plan", "plans/q.yaml", "-i", "inventory/q.yaml", "--show-origin",
                   "--set", "service.args.tensor-parallel-size=${host.gpus}", cwd=tmp_path)
    rows = [line.split() for line in planned.stdout.splitlines()]
    assert ["127.0.0.1", "${host.gpus}", "2", "hosts.127.0.0.1.vars.gpus",
            "(inventory/q.yaml)"] in rows, planned.stdout
    assert "PlanError" not in planned.stderr and "${host" not in planned.stderr
