"""Names that become file and folder names (hosts, plans, checks, commands, collected paths)
are held to one rule where they are loaded (orchestrator/names.py), so none climbs out of its
folder or lands on another's file; run through the CLI as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import last_run, orch

from orchestrator.errors import RunFolderError
from orchestrator.names import check_name, is_name
from orchestrator.runs.layout import RunLayout

CLIMB = "../../../../{target}"


@pytest.mark.parametrize("form", ["yaml", "ini"])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_an_inventory_host_named_as_a_path_is_refused_and_nothing_lands_outside(
        tmp_path: Path, form: str, command: str) -> None:
    target = tmp_path / "outside"
    host = CLIMB.format(target=target.relative_to("/"))
    (tmp_path / "p.yaml").write_text("name: ok\nhosts: all\n")
    inventory = tmp_path / f"i.{form}"
    if form == "yaml":
        inventory.write_text(f"hosts:\n  {host}: {{connection: local}}\ngroups: {{all: [{host}]}}\n")
    else:
        inventory.write_text(f"[all]\n{host} ansible_connection=local\n")
    result = orch(command, tmp_path / "p.yaml", "-i", inventory, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    said = " ".join(output.split())
    assert f"i.{form}:2:" in said and "expected a host name" in said and host in said
    assert not target.exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("where", "plan", "says"), [
    ("plan name", "name: ../../x\n", "expected a plan name"),
    ("check name", "name: ok\nsmoke: [{name: ../../x, prompt: hi}]\n", "expected a check name"),
    ("command name", "name: ok\ncommands: [{name: ../x, run: [true]}]\n", "expected a short name"),
    ("service name", "name: ok\npython: {venv: /opt/v}\nservice: {model: m, name: a/b}\n",
     "expected a service name"),
    ("two checks, one file", "name: ok\nsmoke: [{name: a, prompt: x}, {name: a, prompt: y}]\n",
     "'a' is given twice"),
    ("one path collected twice", "name: ok\ncollect: [{path: /a/b}, {path: /a/b}]\n",
     "'/a/b' is given twice"),
])
def test_names_that_name_files_are_refused_where_loaded(tmp_path: Path, where: str, plan: str,
                                                         says: str) -> None:
    (tmp_path / "p.yaml").write_text(plan)
    result = orch("validate", tmp_path / "p.yaml", cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert says in " ".join(output.split())


def test_the_name_rule() -> None:
    for good in ("gpu1", "gpu1.example.com", "10.0.0.5", "2001:db8::1", "user@gpu1", "a_b-c"):
        assert is_name(good), good
    for bad in ("", ".", "..", "../x", "a/b", "-rf", ".hidden", "a b", "a\nb", "a\x1b[2J", "x" * 201,
                "a;b", "$(id)", "é"):
        assert not is_name(bad), bad
    with pytest.raises(ValueError, match="expected a thing: letters"):
        check_name("a/b", "a thing")


def test_a_run_folder_never_takes_a_host_name_that_climbs_out(tmp_path: Path) -> None:
    """The loaders refuse such a name; a hand-edited meta.json must not get one past."""
    with pytest.raises(RunFolderError, match="cannot name a folder"):
        RunLayout(tmp_path).host("../../x")
    with pytest.raises(RunFolderError, match=r"without '\.\.'"):
        RunLayout(tmp_path).host("h").collected("/a/../../../x")


def test_a_hand_edited_meta_naming_a_host_outside_is_an_error_not_a_read(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "p" / "20260101T000000Z-00000000"
    run.mkdir(parents=True)
    (tmp_path / "secret.json").write_text("{}")
    (run / "meta.json").write_text(json.dumps({
        "orch_version": "0", "plan": "p", "plan_digest": "0" * 64, "command": "apply",
        "hosts": ["../../../../secret"], "started": "2026-01-01T00:00:00+00:00",
        "status": "ok"}))
    result = orch("compare", str(run), cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert "cannot name a folder" in output


@pytest.mark.slow
def test_collected_paths_keep_one_file_each(tmp_path: Path) -> None:
    """`/x/a/b` and `/x/a_b` once mapped to one file name: apply said 2 files and kept one."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").write_text("slash\n")
    (tmp_path / "a_b").write_text("underscore\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "collect", "hosts": "localhost", "collect": [
        {"path": str(tmp_path / "a" / "b")}, {"path": str(tmp_path / "a_b")}]}))
    result = orch("apply", plan, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 files" in result.stdout
    kept = last_run(tmp_path) / "hosts" / "localhost" / "collect"
    inside = str(tmp_path).lstrip("/")
    assert (kept / inside / "a" / "b").read_text() == "slash\n"
    assert (kept / inside / "a_b").read_text() == "underscore\n"
