"""A run folder's records reach the disk together (local_files.sync_files) before meta.json
says how the run ended; a record that cannot be synced is a clear error of that path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.errors import RunFolderError
from orchestrator.local_files import sync_files
from orchestrator.runs.run_records import HostSteps
from orchestrator.runs.writer import RunFolder


def test_sync_files_syncs_many_and_skips_a_file_gone_since(tmp_path: Path) -> None:
    paths = []
    for i in range(40):
        path = tmp_path / f"h{i % 5}" / f"r{i}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text("{}")
        paths.append(path)
    paths[3].unlink()
    sync_files([*paths, paths[0]])  # a path twice, one gone: no error


def test_sync_files_raises_for_a_path_that_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").write_text("")
    with pytest.raises(NotADirectoryError):
        sync_files([tmp_path / "ok", tmp_path / "not-a-folder" / "record.json"])


def _folder(tmp_path: Path) -> RunFolder:
    folder = RunFolder.create("p", "d" * 8, root=tmp_path, hosts=["h1"])
    folder.write_steps(HostSteps(host="h1"))
    return folder


def test_finish_writes_meta_after_the_records(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    folder.finish("complete")
    folder.close()
    assert json.loads(folder.layout.meta.read_text())["status"] == "complete"
    assert json.loads(folder.host("h1").steps.read_text())["host"] == "h1"


def test_a_record_that_cannot_be_synced_fails_the_finish_naming_it(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    host = folder.host("h1").steps.parent
    shutil.rmtree(host)
    host.write_text("a file where the host's folder was")
    with pytest.raises(RunFolderError, match=r"steps\.json"):
        folder.finish("complete")
    assert json.loads(folder.layout.meta.read_text())["status"] == "incomplete"
    folder.write_steps(HostSteps(host="h2"))
    folder.finish("failed", best_effort=True)  # after another failure: never hides it
    folder.close()
