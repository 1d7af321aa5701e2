"""The bad-plan corpus: every file in tests/plan/bad/ is a plan that must fail to load with
one clear, positioned error. Each file states its expectations in header comments:

    # expect: <fragment the message must contain>     (repeatable)
    # at: LINE:COLUMN                                  (where the caret points)
    # file: <path the error names, relative to bad/>   (default: the plan itself)
    # set: PATH=VALUE / # overlay: FILE                (extra layers, repeatable)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import PlanError
from orchestrator.plan.loader import load_plan

BAD = Path(__file__).parent / "bad"
CASES = sorted(BAD.glob("*.yaml"))
_HEADER = re.compile(r"^# (expect|at|file|set|overlay): (.*)$")


def _header(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        match = _HEADER.match(line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_bad_plan_gives_one_clear_error(case: Path) -> None:
    header = _header(case)
    assert header.get("expect"), f"{case.name} states no expectation"
    overlays = [BAD / o for o in header.get("overlay", [])]
    with pytest.raises(PlanError) as raised:
        load_plan(case, overlays, header.get("set", []))
    error = raised.value
    text = str(error)
    for fragment in header["expect"]:
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    assert "Traceback" not in text
    # Every error names where it comes from: a file or the --set argument.
    expected_file = header.get("file", [case.name])[0]
    assert error.file is not None
    if header.get("set") and "file" not in header and error.line is None:
        assert error.file.startswith("--set ")
    else:
        assert error.file.endswith(expected_file), text
    if "at" in header:
        line, column = (int(n) for n in header["at"][0].split(":"))
        assert (error.line, error.column) == (line, column), text
        assert error.snippet and "^" in error.snippet
        # The caret sits under the reported column of the quoted source line.
        source, caret = error.snippet.splitlines()[-2:]
        assert (
            caret.index("^") - caret.index("|")
            == source.index("|") - source.index("|") + column + 1
        )
