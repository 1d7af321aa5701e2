"""bench/level.py: compose as a table: request records in, the level's figures out
(tests/bench/compose_cases.yaml). Pure: no server, no clock but the level's `date`."""

from __future__ import annotations

from typing import Any

import pytest
from level_cases import CASES, compose_case, warmup_count


def _at(result: dict[str, Any], dotted: str) -> Any:
    value: Any = result
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_compose(case: dict[str, Any]) -> None:
    level = compose_case(case)
    for key, expected in case["expect"].items():
        got = _at(level.result.model_dump(), key)
        if isinstance(expected, float):
            assert got == pytest.approx(expected), key
        else:
            assert got == expected, key
    # every request (warm-up included) is a row of the level's JSONL
    assert len(level.rows) == warmup_count(case) + sum(len(r["requests"]) for r in case["repeats"])
