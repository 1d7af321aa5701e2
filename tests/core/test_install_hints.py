"""No text of orch tells a user to install orch from the package index by name: a project
called `orch` there is someone else's, so such a hint would install a stranger's code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BY_NAME = re.compile(r"""pip3?\s+install\s+(?:-U\s+|--upgrade\s+)?['"]?orch(?:\[|['"\s]|$)""", re.M)


def _texts() -> list[Path]:
    return [*ROOT.glob("README.md"), *(ROOT / "docs").rglob("*.md"), *(ROOT / "orchestrator").rglob("*.py"),
            *(ROOT / "scripts").glob("*")]


def test_no_hint_installs_orch_from_the_index_by_name() -> None:
    found = [f"{path.relative_to(ROOT)}: {match.group(0)!r}" for path in _texts() if path.is_file()
             for match in BY_NAME.finditer(path.read_text(errors="replace"))]
    assert found == []


def test_the_pattern_catches_what_it_is_for() -> None:
    for bad in ("pip install 'orch[report]'", "pip install orch", 'pip3 install "orch[report]"'):
        assert BY_NAME.search(bad), bad
    for fine in ("pip install -e '.[report]'", "pip install orchestra", "pip install matplotlib"):
        assert not BY_NAME.search(fine), fine
