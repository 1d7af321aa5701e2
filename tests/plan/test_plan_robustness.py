"""Whatever the input, loading a plan either succeeds or raises one PlanError: never another
exception (which would reach the user as a traceback)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import PlanError
from orchestrator.plan.layers import parse_set
from orchestrator.plan.loader import load_plan

# Text made of the characters that matter to YAML and to orch's references.
_pieces = [
    *list("abcnx01:-[]{},'\"#&*!|>%@ \n\t$.="),
    "${vars.",
    "${env:",
    "name: ",
    "service:\n  ",
]
_yaml_text = st.lists(st.sampled_from(_pieces), max_size=60).map("".join)

_KEYS = [
    "name",
    "hosts",
    "vars",
    "python",
    "install",
    "service",
    "env",
    "bench",
    "smoke",
    "files",
    "x",
]
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70000),
    st.text(max_size=8),
    st.sampled_from(["${vars.v}", "${env:T}", "30m", "vllm==1"]),
)
_data = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from([*_KEYS, "model", "port", "packages", "venv"]), inner, max_size=4
        )
    ),
    max_leaves=15,
)


def _load(text: str, sets: list[str] | None = None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "plan.yaml"
        path.write_text(text)
        try:
            load_plan(path, sets=sets or [])
        except PlanError as error:
            assert str(error)  # renders without raising


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_yaml_text)
def test_any_text_loads_or_fails_with_a_plan_error(text: str) -> None:
    _load(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _data, max_size=5))
@pytest.mark.slow
def test_any_structure_loads_or_fails_with_a_plan_error(data: dict[str, Any]) -> None:
    _load(yaml.safe_dump({"name": "p", **data}))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab.="[]{}: 0-')), max_size=20))
def test_any_set_argument_loads_or_fails_with_a_plan_error(argument: str) -> None:
    _load("name: p\nservice: {model: m}\nsmoke: [{name: a, prompt: b}]\n", [argument])


_segment = st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True)


@given(
    st.lists(_segment, min_size=1, max_size=4), st.one_of(st.integers(), st.booleans(), _segment)
)
def test_parse_set_round_trips(path: list[str], value: Any) -> None:
    text = yaml.safe_dump(value).strip().removesuffix("...").strip()
    assert parse_set(".".join(path) + "=" + text) == (path, value)
