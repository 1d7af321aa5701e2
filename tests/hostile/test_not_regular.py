"""Files that are not files: a FIFO blocks whoever opens it, a device never ends. orch reads
only regular files, on the host (the probe's file facts, `collect:`) and on the controller
(run folders, templates), and says what it found instead; real FIFOs, real devices, the CLI."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import last_run, orch

from orchestrator import local_files


def _plan(tmp_path: Path, **sections: object) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "nonreg", "hosts": "localhost", **sections}))
    return plan


def _said(result: object) -> str:
    output = result.stdout + result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in output, output
    return " ".join(output.split())


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_fifo_where_a_file_goes_is_refused_not_waited_on(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "app.conf"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = orch(command, _plan(tmp_path, files=[{"path": str(fifo), "content": "x\n"}]),
                  cwd=tmp_path, timeout=60)
    assert time.monotonic() - started < 30
    said = _said(result)
    assert result.returncode == 1, said
    assert f"{fifo} is a FIFO on the host, not a regular file" in said
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still there, not replaced


def test_a_device_where_a_file_goes_is_refused(tmp_path: Path) -> None:
    """`orch plan` only: a regression must not replace this machine's /dev/null."""
    result = orch("plan", _plan(tmp_path, files=[{"path": "/dev/null", "content": "x\n"}]),
                  cwd=tmp_path, timeout=60)
    said = _said(result)
    assert result.returncode == 1, said
    assert "/dev/null is a character device on the host, not a regular file" in said


def test_a_folder_where_a_file_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    result = orch("apply", _plan(tmp_path, files=[{"path": str(tmp_path / "conf.d"),
                                                  "content": "x\n"}]), cwd=tmp_path, timeout=60)
    said = _said(result)
    assert result.returncode == 1, said
    assert "is a directory on the host, not a regular file" in said
    assert list((tmp_path / "conf.d").iterdir()) == []


@pytest.mark.slow
def test_collect_skips_fifos_and_devices_with_a_word_and_keeps_the_rest(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    kept = tmp_path / "kept.log"
    kept.write_text("kept\n")
    plan = _plan(tmp_path, collect=[{"path": str(fifo)}, {"path": "/dev/zero"},
                                    {"path": str(kept)}])
    started = time.monotonic()
    result = orch("apply", plan, cwd=tmp_path, timeout=60)
    assert time.monotonic() - started < 30  # /dev/zero was read for 23 s
    said = _said(result)
    assert result.returncode == 0, said
    assert "1 files" in said
    assert f"skipped {fifo}: not a regular file: fifo" in said
    assert "skipped /dev/zero: not a regular file: character special file" in said
    collected = last_run(tmp_path) / "hosts" / "localhost" / "collect"
    assert [p.name for p in collected.rglob("*") if p.is_file()] == ["kept.log"]


def test_a_required_fifo_to_collect_fails_the_host(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    result = orch("apply", _plan(tmp_path, collect=[{"path": str(fifo), "optional": False}]),
                  cwd=tmp_path, timeout=60)
    said = _said(result)
    assert result.returncode == 1
    assert f"cannot collect {fifo}: not a regular file: fifo" in said


def _run_folder(root: Path) -> Path:
    run = root / "runs" / "p" / "20260101T000000Z-00000000"
    run.mkdir(parents=True)
    return run


@pytest.mark.parametrize("record", ["meta.json", "plan.yaml"])
def test_a_fifo_in_a_run_folder_is_named_not_waited_on(tmp_path: Path, record: str) -> None:
    run = _run_folder(tmp_path)
    if record != "meta.json":
        (run / "meta.json").write_text(json.dumps({
            "orch_version": "0", "plan": "p", "plan_digest": "0" * 64, "command": "apply",
            "hosts": [], "started": "2026-01-01T00:00:00+00:00", "status": "ok"}))
    os.mkfifo(run / record)
    result = orch("runs", cwd=tmp_path, timeout=60)
    said = _said(result)
    assert f"{record}: not a regular file (a FIFO)" in said or \
        f"cannot read {run / record}: not a regular file (a FIFO)" in said, said


def test_a_template_that_is_a_fifo_is_a_plan_error(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "t.j2")
    result = orch("plan", _plan(tmp_path, files=[{"path": str(tmp_path / "out"),
                                                 "template": "t.j2"}]), cwd=tmp_path, timeout=60)
    said = _said(result)
    assert result.returncode == 1
    assert "not found" in said or "not a regular file" in said


def test_the_controller_reads_only_regular_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_bytes(b"x" * 100)
    for path, says in ((tmp_path / "fifo", "a FIFO"), (Path("/dev/zero"), "a character device"),
                       (tmp_path, "a directory")):
        with pytest.raises(local_files.NotRegularFile, match=says):
            local_files.read_bytes(path)
    with pytest.raises(local_files.NotRegularFile, match="too large"):
        local_files.read_bytes(tmp_path / "big", max_bytes=10)
    assert local_files.read_text(tmp_path / "big") == "x" * 100


@pytest.mark.parametrize(("inventory", "said"), [
    ("hosts: {a: {address: 127.0.0.1}}\nssh: {known_hosts: FIFO}\n",
     "cannot read known_hosts file FIFO: not a regular file (a FIFO)"),
    ("hosts: {a: {address: 127.0.0.1}}\nssh: {config: FIFO}\n",
     "ssh.config names 'FIFO', which is a FIFO, not a regular file"),
    ("hosts: {a: {address: 127.0.0.1, identity_file: FIFO}}\n",
     "identity_file 'FIFO' is a FIFO, not a regular file"),
], ids=["known_hosts", "ssh config", "identity_file"])
def test_an_ssh_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, inventory: str,
                                                             said: str) -> None:
    """`orch plan` waited forever on a known_hosts file that is a FIFO (only a signal ended
    it), and called a FIFO ssh config or key "does not exist"."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "i.yaml").write_text(inventory.replace("FIFO", str(fifo)))
    (tmp_path / "p.yaml").write_text("name: ok\nhosts: a\n")
    result = orch("plan", "p.yaml", "-i", "i.yaml", cwd=tmp_path, timeout=60)
    assert result.returncode == 1, _said(result)
    assert said.replace("FIFO", str(fifo), 1) in _said(result)


def test_a_fifo_the_probe_reads_is_not_waited_on(tmp_path: Path) -> None:
    """The fact program read a venv's pyvenv.cfg with a blocking open: a FIFO there held
    `orch plan` until a signal; a file that is not a regular file now reads as absent."""
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    os.mkfifo(venv / "pyvenv.cfg")
    plan = _plan(tmp_path, python={"venv": str(venv)})
    result = orch("plan", plan, cwd=tmp_path, timeout=60)
    said = _said(result)
    assert result.returncode == 0 and f"create venv {venv}" in said, said
    assert stat.S_ISFIFO((venv / "pyvenv.cfg").stat().st_mode)
