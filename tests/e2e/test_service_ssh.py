"""The service lifecycle end to end over a real sshd, with the simulator as the model server
(process backend): launch, readiness, smoke, restart-on-change, crash diagnosis, deadlines,
preflight and the restart budget. The CLI runs as a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.ports import free_port
from fixtures.sshd import SshServer

pytestmark = pytest.mark.slow

SMOKE = [
    {"name": "reasoning", "prompt": "Why is the sky blue?",
     "expect": {"reasoning": "present", "content_regex": "(?i)scatter"}},
    {"name": "code", "prompt": "Write a Python function add(a, b).",
     "expect": {"python_function": {"name": "add", "calls": [{"args": [2, 3], "returns": 5}]}}},
]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One host venv for the module: creating one costs seconds."""
    return tmp_path_factory.mktemp("host") / "venv"


@pytest.fixture()
def env(tmp_path: Path, sshd: SshServer, venv: Path) -> Iterator[dict[str, Any]]:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    state: dict[str, Any] = {"tmp": tmp_path, "inventory": inventory, "venv": venv,
                             "port": free_port(), "name": f"svc-{tmp_path.name[-12:]}"}
    yield state
    plan = state.get("plan")
    if plan is not None:  # never leave a server running behind a test
        orch("stop", plan, "-i", inventory, cwd=tmp_path)


def write(state: dict[str, Any], *, sim: dict[str, Any] | None = None, service: dict[str, Any] | None = None,
          smoke: list[dict[str, Any]] | None = None, health: dict[str, Any] | None = None) -> Path:
    plan = {
        "name": "svc",
        "hosts": "all",
        "python": {"venv": str(state["venv"]), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {
            "engine": "sim", "model": "moonshotai/Kimi-K2.5", "served_model_name": "kimi-k2.5",
            "host": "127.0.0.1", "port": state["port"], "backend": "process", "name": state["name"],
            "args": {"tensor-parallel-size": 8, "reasoning-parser": "kimi_k2"},
            # a start-up of under a second (2.3 s at time_scale): some 20 starts in the module
            "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.003,
                    "startup_time_scale": 0.001, **(sim or {})},
            "restart": {"max_restarts": 1},
            **(service or {}),
        },
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s", **(health or {})},
        "smoke": SMOKE if smoke is None else smoke,
    }
    path = state["tmp"] / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    state["plan"] = path
    return path


def apply(state: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return orch("apply", state["plan"], "-i", state["inventory"], cwd=state["tmp"])


def test_launch_ready_smoke_then_no_restart_then_exactly_one_restart(env: dict[str, Any]) -> None:
    write(env)
    first = apply(env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "start " in first.stdout and "not running" in first.stdout
    run = last_run(env["tmp"])
    startup = json.loads((run / "hosts" / "h1" / "startup.json").read_text())
    assert [p["phase"] for p in startup["phases"]][-1] == "ready"
    assert {"weights", "compile", "cuda_graphs"} <= {p["phase"] for p in startup["phases"]}
    smoke = json.loads((run / "hosts" / "h1" / "smoke" / "code.json").read_text())
    assert smoke["passed"] is True
    assert "Application startup complete." in (run / "hosts" / "h1" / "service.log").read_text()
    pid = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]["pid"]

    again = apply(env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "restart" not in again.stdout
    status = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    assert status["pid"] == pid and status["state"] == "running" and status["served"] == ["kimi-k2.5"]

    write(env, service={"args": {"tensor-parallel-size": 8, "reasoning-parser": "kimi_k2",
                                 "max-num-seqs": 64}})
    # plan shows the change as a diff, and what the restart costs (the start-up just measured)
    planned = orch("plan", env["plan"], "-i", env["inventory"], "--set", "env.NCCL_DEBUG=INFO",
                   "--detailed-exitcode", cwd=env["tmp"])
    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert "changed: command line, environment" in planned.stdout
    assert "+ --max-num-seqs 64\n+ env NCCL_DEBUG=INFO\n" in planned.stdout
    took = re.search(rf"applying restarts {env['name']}: a full start-up \(the last one took "
                     r"([\d.]+)s\)", planned.stdout)
    assert took and abs(float(took.group(1)) - startup["seconds"]) < 0.11, planned.stdout
    changed = apply(env)
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert changed.stdout.count("restart ") == 1
    assert "changed: command line" in changed.stdout
    status = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    assert status["pid"] != pid


def test_apply_after_a_crash_relaunches(env: dict[str, Any]) -> None:
    write(env, smoke=[])
    assert apply(env).returncode == 0
    status = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    subprocess.run(["kill", "-KILL", str(status["pid"])], check=True)
    again = apply(env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "start " in again.stdout and "not running" in again.stdout

    relaunched = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    restart = orch("restart", env["plan"], "-i", env["inventory"], cwd=env["tmp"])
    assert restart.returncode == 0, restart.stdout + restart.stderr
    assert "restart requested" in restart.stdout
    after = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    assert after["state"] == "running" and after["pid"] != relaunched["pid"]
    run = last_run(env["tmp"])
    assert json.loads((run / "meta.json").read_text())["command"] == "restart"
    assert (run / "hosts" / "h1" / "startup.json").exists()


def test_startup_crash_is_diagnosed_with_both_versions_and_the_fix(env: dict[str, Any]) -> None:
    write(env, sim={"fail_at_startup": "flashinfer-mismatch"})
    result = apply(env)
    assert result.returncode == 1
    out = result.stdout
    assert "died during start-up" in out
    assert "0.6.3" in out and "0.6.4" in out
    assert "flashinfer-cubin==0.6.4" in out and "install.packages" in out
    assert "Traceback" not in result.stderr
    assert re.search(r"smoke\s+skipped", out)  # later stages say they did not run
    diagnosis = json.loads((last_run(env["tmp"]) / "hosts" / "h1" / "diagnosis.json").read_text())
    assert diagnosis[0]["key"].startswith("flashinfer") and "0.6.3" in json.dumps(diagnosis[0])
    assert json.loads((last_run(env["tmp"]) / "meta.json").read_text())["status"] == "failed"


def test_crash_during_smoke_is_reported(env: dict[str, Any]) -> None:
    # The readiness probe's one-token request is request 1; the first smoke check crashes it.
    write(env, sim={"crash_after_requests": 1})
    result = apply(env)
    assert result.returncode == 1
    assert "smoke" in result.stdout and "failed" in result.stdout
    assert "EngineDeadError" in result.stdout or "died" in result.stdout or "error" in result.stdout.lower()
    said = " ".join(result.stdout.split())
    checks = len(yaml.safe_load(Path(env["plan"]).read_text()).get("smoke") or [])
    # the checks that failed are counted as checks; the server's death is said beside them
    found = re.search(r"(\d+) of (\d+) smoke check\(s\) failed", said)
    assert found is not None and 1 <= int(found[1]) <= int(found[2]) == checks, said
    assert "the server is gone or unhealthy" in said


def test_a_crash_mid_sweep_is_diagnosed_there_and_then(env: dict[str, Any]) -> None:
    path = write(env, smoke=[], sim={"crash_after_requests": 6})
    plan = yaml.safe_load(path.read_text())
    plan["bench"] = {"concurrency": [1, 2], "requests_per_level": 4, "warmup": 0, "max_tokens": 64}
    path.write_text(yaml.safe_dump(plan))
    result = apply(env)
    assert result.returncode == 1, result.stdout + result.stderr
    said = " ".join(result.stdout.split())
    assert "the sweep stopped early" in said
    assert "cause: a GPU kernel crashed (illegal memory access)" in said
    run = last_run(env["tmp"])
    diagnosis = json.loads((run / "hosts" / "h1" / "diagnosis.json").read_text())
    assert diagnosis[0]["key"] == "illegal-memory-access"
    assert (run / "hosts" / "h1" / "bench" / "level-c1.json").exists()  # the finished level stays


def test_slow_start_within_the_deadline(env: dict[str, Any]) -> None:
    write(env, sim={"slow_start": 2.0}, smoke=[], health={"startup_timeout": "30s"})
    result = apply(env)
    assert result.returncode == 0, result.stdout + result.stderr
    startup = json.loads((last_run(env["tmp"]) / "hosts" / "h1" / "startup.json").read_text())
    assert startup["seconds"] >= 2.0


def test_hang_past_the_deadline_times_out_with_the_log_tail(env: dict[str, Any]) -> None:
    write(env, sim={"slow_start": 30.0}, smoke=[], health={"startup_timeout": "3s"})
    result = apply(env)
    assert result.returncode == 1
    assert "not ready after 3 s" in result.stdout
    assert "last log lines" in result.stdout and "Starting to load model" in result.stdout


def test_port_in_use_is_caught_by_preflight(env: dict[str, Any]) -> None:
    write(env, smoke=[])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", env["port"]))
        squatter.listen()
        check = orch("plan", env["plan"], "-i", env["inventory"], cwd=env["tmp"])
        result = apply(env)
    assert check.returncode == 1
    assert result.returncode == 1
    assert f"port {env['port']}" in result.stdout
    assert "ready" not in result.stdout.split("recap")[0].split("service")[-1]


def test_crash_loop_is_capped_by_the_restart_budget(env: dict[str, Any]) -> None:
    # An argument the server rejects: it dies at once, for a reason no signature knows.
    write(env, smoke=[], service={"extra_args": ["--max-num-seqs", "not-a-number"]})
    result = apply(env)
    assert result.returncode == 1
    assert "died 2 times during start-up" in result.stdout
    assert "max_restarts: 1" in result.stdout


def test_bench_through_an_ssh_port_forward_writes_results_into_the_run_folder(env: dict[str, Any]) -> None:
    path = write(env, smoke=[])
    plan = yaml.safe_load(path.read_text())
    plan["bench"] = {"concurrency": [1, 4], "requests_per_level": "1x", "warmup": 0,
                     "max_tokens": 64, "via": "ssh", "mode": "batch"}
    path.write_text(yaml.safe_dump(plan))
    result = apply(env)
    assert result.returncode == 0, result.stdout + result.stderr
    bench = last_run(env["tmp"]) / "hosts" / "h1" / "bench"
    summary = json.loads((bench / "summary.json").read_text())
    assert (bench / "sweep.csv").read_text().count("\n") == 3  # header + 2 levels
    levels = sorted(bench.glob("level-*.json"))
    assert len(levels) == 2
    first = json.loads(levels[0].read_text())
    assert first["completed"] >= 1 and first["failed"] == 0
    assert summary  # written, with the sweep's figures


def test_ctrl_c_during_a_sweep_keeps_the_finished_levels_and_exits_130(env: dict[str, Any]) -> None:
    path = write(env, smoke=[])
    plan = yaml.safe_load(path.read_text())
    # Model time runs 333x faster here: 1024 tokens at ~61 tok/s take ~50 ms per request.
    plan["bench"] = {"concurrency": [1, 2, 4, 8], "requests_per_level": 60, "warmup": 0,
                     "max_tokens": 1024, "mode": "closed"}
    path.write_text(yaml.safe_dump(plan))
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "apply", str(path), "-i", str(env["inventory"])],
        cwd=env["tmp"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((env["tmp"] / "runs").glob("*/*/hosts/h1/bench/level-c1.json")):
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    run = last_run(env["tmp"])
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
    c1 = json.loads((run / "hosts" / "h1" / "bench" / "level-c1.json").read_text())
    assert c1["completed"] == 60 and not c1["partial"]
    assert (run / "hosts" / "h1" / "service.log").exists()  # collected even so
    # no figure the stopped level does not have ("40.0 tok/s" is a figure, "0.0 tok/s" not)
    assert not re.search(r"(?<![\d.,])0\.0 tok/s", out), out
    orch("stop", env["plan"], "-i", env["inventory"], cwd=env["tmp"])


def apply_waiting_for_start_up(env: dict[str, Any]) -> subprocess.Popen[str]:
    """`orch apply` of a slow-starting server, returned once it waits for readiness."""
    write(env, sim={"slow_start": 30.0}, smoke=[])
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "apply", str(env["plan"]), "-i", str(env["inventory"])],
        cwd=env["tmp"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = list((env["tmp"] / "runs").glob("*/*/events.jsonl"))
        if runs and '"stage": "startup"' in runs[0].read_text():
            break
        time.sleep(0.2)
    return process


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_during_start_up_marks_the_run_interrupted(
    env: dict[str, Any], signum: int, code: int
) -> None:
    process = apply_waiting_for_start_up(env)
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    assert process.returncode == code, out + err
    meta = json.loads((last_run(env["tmp"]) / "meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["finished"] is not None
    assert "run folder marked interrupted" in out
    assert "keeps running" in out and "orch stop" in out  # and how to stop it
    assert f"interrupted ({signal.Signals(signum).name})" in err
    assert "Traceback" not in err
    orch("stop", env["plan"], "-i", env["inventory"], cwd=env["tmp"])


def test_a_stopped_server_process_is_reported_hung_within_a_few_polls(env: dict[str, Any]) -> None:
    process = apply_waiting_for_start_up(env)
    pidfile = env["venv"] / ".orch" / "service" / env["name"] / "pid"
    pid = int(pidfile.read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        out, err = process.communicate(timeout=60)
        assert time.monotonic() - started < 20  # not the whole start-up deadline
        assert process.returncode == 1, out + err
        said = " ".join(out.split())
        assert f"the server process {pid} is stopped (state T" in said
        assert f"kill -CONT {pid}" in said
    finally:
        os.kill(pid, signal.SIGCONT)
        orch("stop", env["plan"], "-i", env["inventory"], cwd=env["tmp"])


def test_orch_stop_during_start_up_is_not_undone_by_a_relaunch(env: dict[str, Any]) -> None:
    process = apply_waiting_for_start_up(env)
    refused = orch("stop", env["plan"], "-i", env["inventory"], cwd=env["tmp"])
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 75, said  # the apply holds the service's lock
    assert "another apply holds" in said and "--break-lock" in said
    stop = orch("stop", env["plan"], "-i", env["inventory"], "--break-lock", cwd=env["tmp"])
    assert "stopped" in stop.stdout, stop.stdout + stop.stderr
    out, err = process.communicate(timeout=60)
    said = " ".join(out.split())
    # The apply ends as one whose lock was taken (75), naming the stop that took it.
    assert process.returncode == 75, out + err
    assert "lock was taken over during the start-up" in said and "`orch stop`" in said
    assert "relaunch 1/" not in out
    status = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    assert status["state"] != "running"


def test_a_pidfile_naming_someone_elses_process_is_not_the_service(env: dict[str, Any]) -> None:
    write(env, smoke=[])
    assert apply(env).returncode == 0
    assert "stopped" in orch("stop", env["plan"], "-i", env["inventory"], cwd=env["tmp"]).stdout
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:  # after a reboot, the recorded pid belongs to another program
        pidfile = env["venv"] / ".orch" / "service" / env["name"] / "pid"
        pidfile.write_text(f"{stranger.pid} 1\n")
        status = json.loads(orch("status", env["plan"], "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
        assert status["state"] != "running"
        again = apply(env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "not running" in again.stdout
        assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()


def test_plan_warns_that_pending_package_changes_will_restart_the_service(env: dict[str, Any]) -> None:
    from fixtures.wheels import make_wheel

    path = write(env, smoke=[])
    assert apply(env).returncode == 0
    wheels = env["tmp"] / "wheels"
    make_wheel(wheels, "orchtest-extra", "1.0.0")
    plan = yaml.safe_load(path.read_text())
    plan["install"] = {"packages": ["orchtest-extra==1.0.0"], "find_links": [str(wheels)], "no_index": True}
    path.write_text(yaml.safe_dump(plan))
    check = orch("plan", path, "-i", env["inventory"], "--detailed-exitcode", cwd=env["tmp"])
    assert check.returncode == 2
    assert "service: likely to change after the pending changes above" in check.stdout
    result = apply(env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "changed: packages" in result.stdout


def test_a_command_that_restarts_the_service_restarts_it_once(env: dict[str, Any]) -> None:
    path = write(env, smoke=[])
    weights = env["tmp"] / "weights"

    def with_command(version: str) -> None:
        plan = yaml.safe_load(path.read_text())
        plan["commands"] = [{"name": "weights", "shell": f"mkdir -p {weights} && touch {weights}/{version}",
                             "creates": f"{weights}/{version}", "restarts_service": True}]
        path.write_text(yaml.safe_dump(plan))

    with_command("v1")
    first = apply(env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "run weights:" in first.stdout and first.stdout.count("start ") == 1
    pid = json.loads(orch("status", path, "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]["pid"]
    assert "restart" not in apply(env).stdout  # converged: the guard holds, nothing runs
    with_command("v2")
    planned = orch("plan", path, "-i", env["inventory"], cwd=env["tmp"])
    assert "run weights:" in planned.stdout and "likely to change after the pending" in planned.stdout
    second = apply(env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "restart " in second.stdout and "a command asked for a restart" in second.stdout
    status = json.loads(orch("status", path, "-i", env["inventory"], "--json", cwd=env["tmp"]).stdout)[0]
    assert status["pid"] != pid and status["state"] == "running"
    assert "restart" not in apply(env).stdout  # the marker went with the start
