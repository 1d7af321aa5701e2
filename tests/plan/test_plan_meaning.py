"""A field's meaning is said on the field (plan/meaning.py marks in plan/models.py); the lists
the loader and the host variables used to keep beside the model are read back from it."""

from __future__ import annotations

from orchestrator.plan.host_vars import ALLOWED
from orchestrator.plan.meaning import controller_path, expand, host_vars, patterns
from orchestrator.plan.models import Plan


def test_the_controller_paths_and_host_variable_places_come_from_the_model() -> None:
    assert patterns(Plan, controller_path) == (
        ("files", "*", "template"), ("bench", "dataset"), ("bench", "tokenizer"))
    assert set(patterns(Plan, host_vars)) == {
        ("env",), ("files",), ("service", "args"), ("service", "extra_args"), ("commands",),
        ("service", "nodes", "address"), ("service", "nodes", "ray_args")}
    assert set(ALLOWED) == set(patterns(Plan, host_vars))


def test_a_pattern_names_the_paths_the_data_holds() -> None:
    data = {"files": [{"path": "/a", "template": "a.j2"}, {"path": "/b", "content": "x"},
                      {"path": "/c", "template": "c.j2"}],
            "bench": {"dataset": "d.jsonl"}}
    found = [p for pattern in patterns(Plan, controller_path) for p in expand(data, pattern)]
    assert found == [("files", 0, "template"), ("files", 2, "template"), ("bench", "dataset")]
    assert expand({"files": "not a list"}, ("files", "*", "template")) == []
