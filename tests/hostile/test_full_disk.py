"""A full disk under the run folder, wherever the apply is when it fills: one clear error (no
traceback), no half-written temporary file left, and meta.json says `failed` where it can
still be written. The disk is a real tmpfs of a few kilobytes, mounted for the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import orch

pytestmark = pytest.mark.slow


# With 4 KiB pages, the disk fills at plan.yaml, events.jsonl, steps.json, facts.json and
# the final meta.json in turn.
@pytest.mark.parametrize("free_kib", [4, 8, 12, 16, 20])
def test_a_full_disk_is_one_clear_error(tmp_path: Path, small_disk: Path, free_kib: int) -> None:
    (small_disk / "filler").write_bytes(b"\0" * ((64 - free_kib) * 1024))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "full", "hosts": "localhost",
        "files": [{"path": str(tmp_path / "etc" / f"f{i}.conf"), "content": f"{i}\n"}
                  for i in range(3)],
    }))
    result = orch("apply", plan, "--runs-dir", small_disk / "runs", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "No space left on device" in output and "the disk is full" in output
    assert "Traceback" not in output
    assert list(small_disk.rglob("*.tmp")) == []
    for meta in small_disk.rglob("meta.json"):
        assert json.loads(meta.read_text())["status"] in ("failed", "incomplete")
