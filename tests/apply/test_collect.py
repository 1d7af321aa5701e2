"""`collect:` and the service logs come back in one round trip, whatever they hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import last_run, orch

from orchestrator.apply.collect import read_files
from orchestrator.transport.local import LocalTransport


def test_files_of_any_name_and_content_come_back_in_one_command(tmp_path: Path) -> None:
    odd = tmp_path / "a file $(touch pwned) 'quoted'.log"
    odd.write_bytes("héllo\nline two\x00 and a NUL\n".encode())
    empty = tmp_path / "empty"
    empty.write_text("")
    missing = tmp_path / "missing"
    transport = LocalTransport("local")
    found = read_files(transport, [str(odd), str(empty), str(missing), str(tmp_path)])
    assert found[str(odd)] == ("héllo\nline two\x00 and a NUL\n", "")
    assert found[str(empty)] == ("", "")
    assert found[str(missing)][0] is None and "No such file" in found[str(missing)][1]
    assert found[str(tmp_path)][0] is None and "directory" in found[str(tmp_path)][1]
    assert transport.round_trips == 1
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


@pytest.mark.slow
def test_apply_collects_what_the_plan_names_and_fails_on_a_missing_required_file(tmp_path: Path) -> None:
    kept = tmp_path / "nvidia-smi.txt"
    kept.write_text("GPU 0: RTX PRO 6000\n")
    plan = tmp_path / "plan.yaml"
    items = [{"path": str(kept)}, {"path": str(tmp_path / "maybe"), "optional": True},
             {"path": str(tmp_path / "nope"), "optional": False}]
    plan.write_text(yaml.safe_dump({"name": "collect", "hosts": "localhost", "collect": items}))
    failed = orch("apply", plan, cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    said = " ".join(failed.stdout.split())
    assert f"cannot collect {tmp_path / 'nope'}: " in said and "maybe" not in said
    # what could be collected is kept
    collected = list((last_run(tmp_path) / "hosts" / "localhost" / "collect").rglob("nvidia-smi.txt"))
    assert [p.read_text() for p in collected] == ["GPU 0: RTX PRO 6000\n"]


def test_a_failed_converge_still_collects_what_says_why(tmp_path: Path) -> None:
    """A step that fails (here a guarded command) ends the apply, and the files the plan
    collects (in a real deployment, the service and Ray logs holding the cause) still come
    back into the run folder."""
    evidence = tmp_path / "why.log"
    evidence.write_text("NCCL error: unhandled system error\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "collect-after-failure", "hosts": "localhost",
        "commands": [{"name": "breaks", "run": ["false"]}],
        "collect": [{"path": str(evidence)}]}))
    failed = orch("apply", plan, cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    collected = list((last_run(tmp_path) / "hosts" / "localhost" / "collect").rglob("why.log"))
    assert [p.read_text() for p in collected] == ["NCCL error: unhandled system error\n"]
