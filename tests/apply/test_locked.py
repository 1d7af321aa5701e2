"""`--locked RUN_FOLDER`: what an earlier run froze, read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.apply.locked import Locked, load_locked, locked_hosts
from orchestrator.errors import InventoryError, RunFolderError
from orchestrator.inventory import Inventory


def make_run(tmp_path: Path, freeze: str | None) -> Path:
    run = tmp_path / "runs" / "p" / "20261130T000000Z-abcdef12"
    (run / "hosts" / "h1").mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"hosts": ["h1"], "status": "complete"}))
    (run / "plan.yaml").write_text("name: p\n")
    if freeze is not None:
        (run / "hosts" / "h1" / "freeze.txt").write_text(freeze)
    return run


def test_the_frozen_set_leaves_out_orch_itself(tmp_path: Path) -> None:
    # A simulator run froze the orch build it installed; no index has that build.
    run = make_run(tmp_path, "orch==0.1.0\norchestra==2.0\nvllm==0.17.1\n")
    plan_file, locked = load_locked(run)
    assert plan_file == run / "plan.yaml"
    assert locked.freeze == {"h1": ["orchestra==2.0", "vllm==0.17.1"]}


def test_a_run_without_a_freeze_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="froze no package set"):
        load_locked(make_run(tmp_path, None))


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="not a run folder"):
        load_locked(tmp_path)


def _inventory(*names: str) -> Inventory:
    return Inventory.model_validate({"hosts": {n: {"connection": "local"} for n in names}})


def test_a_locked_apply_targets_the_runs_own_hosts(tmp_path: Path) -> None:
    locked = Locked(folder=tmp_path, freeze={"h1": ["a==1"], "h2": ["a==2"]})
    assert locked_hosts(locked, _inventory("h1", "h2", "h3"), []) == ["h1", "h2"]
    assert locked_hosts(locked, _inventory("h1", "h2", "h3"), ["h2"]) == ["h2"]


def test_a_host_the_run_did_not_freeze_is_an_error_not_another_hosts_set(tmp_path: Path) -> None:
    locked = Locked(folder=tmp_path, freeze={"h1": ["a==1"]})
    with pytest.raises(RunFolderError, match=r"--limit names h3, which .* froze no package set"):
        locked_hosts(locked, _inventory("h1", "h3"), ["h3"])


def test_a_frozen_host_gone_from_the_inventory_is_an_error(tmp_path: Path) -> None:
    locked = Locked(folder=tmp_path, freeze={"h1": ["a==1"], "gone": ["a==1"]})
    with pytest.raises(InventoryError, match="no host or group named 'gone'"):
        locked_hosts(locked, _inventory("h1"), [])
