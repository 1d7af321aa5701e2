"""Layer merging, --set parsing and application, origin bookkeeping: pure functions."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import PlanError
from orchestrator.plan.layers import apply_set, get_path, merge, parse_set, update_origins


@pytest.mark.parametrize(
    ("base", "override", "expected"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": 1}, {"a": 2}, {"a": 2}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3, "z": 4}}, {"a": {"x": 1, "y": 3, "z": 4}}),
        ({"a": [1, 2, 3]}, {"a": [9]}, {"a": [9]}),  # lists replace
        ({"a": {"x": 1}}, {"a": [1]}, {"a": [1]}),  # a list replaces a map
        ({"a": [1]}, {"a": {"x": 1}}, {"a": {"x": 1}}),  # a map replaces a list
        ({"a": 1}, {"a": {"x": 1}}, {"a": {"x": 1}}),
        ({"env": {"HF_TOKEN": "t", "A": "1"}}, {"env": {"HF_TOKEN": None}}, {"env": {"A": "1"}}),
        ({"a": 1}, {"a": None}, {}),  # null deletes
        ({}, {"a": None}, {}),  # deleting what is not there is fine
        ({}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),  # nulls in a new map are dropped
        ({"a": [None, 1]}, {}, {"a": [None, 1]}),  # null inside a list is a value
        ({}, {"a": [None]}, {"a": [None]}),
        ({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"c": 5}}}, {"a": {"b": {"c": 5, "d": 2}}}),
    ],
)
def test_merge(base: dict[str, Any], override: dict[str, Any], expected: dict[str, Any]) -> None:
    assert merge(base, override) == expected


# YAML-like data without nulls: maps of short keys to scalars, lists and maps.
_scalars = st.one_of(st.integers(-5, 5), st.text("abc", max_size=3), st.booleans())
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=3)
    ),
    max_leaves=12,
)
_maps = st.dictionaries(st.sampled_from("abcde"), _values, max_size=4)


@given(_maps, _maps)
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a loaded CI machine
def test_merge_is_pure(base: dict[str, Any], override: dict[str, Any]) -> None:
    before = (copy.deepcopy(base), copy.deepcopy(override))
    result = merge(base, override)
    assert (base, override) == before
    # The result shares no mutable part with the inputs.
    if result:
        result.clear()
    assert (base, override) == before


@given(_maps)
def test_merge_with_nothing_changes_nothing(data: dict[str, Any]) -> None:
    assert merge(data, {}) == data
    assert merge({}, data) == data
    assert merge(data, data) == data


# Data whose shape is fixed by its keys ('a', 'b' scalars, 'c' lists, 'd' maps), so that no
# layer replaces a map by a scalar: the case in which layering is associative.
_shaped: st.SearchStrategy[dict[str, Any]] = st.deferred(
    lambda: st.fixed_dictionaries(
        {},
        optional={"a": _scalars, "b": _scalars, "c": st.lists(_scalars, max_size=2), "d": _shaped},
    )
)


@given(_shaped, _shaped, _shaped)
def test_merge_is_associative_for_layers_of_one_shape(
    a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]
) -> None:
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(data, dict) and data:
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*path, key))]
    return [(path, data)]


@given(_maps, _maps)
def test_the_last_layer_wins_every_leaf_it_sets(
    base: dict[str, Any], override: dict[str, Any]
) -> None:
    result = merge(base, override)
    for path, value in _leaves(override):
        if path and value != {}:
            assert get_path(result, path) == (True, value)
    # Keys only the base has survive.
    for key in base.keys() - override.keys():
        assert result[key] == base[key]


@given(_maps, st.sampled_from("abcde"))
def test_null_deletes_a_key(data: dict[str, Any], key: str) -> None:
    assert key not in merge(data, {key: None})


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("service.port=8001", ["service", "port"], 8001),
        ("service.host=127.0.0.1", ["service", "host"], "127.0.0.1"),
        ("vars.vllm_version=0.17.1", ["vars", "vllm_version"], "0.17.1"),
        ("vars.version='0.20'", ["vars", "version"], "0.20"),
        ("service.args.trust-remote-code=true", ["service", "args", "trust-remote-code"], True),
        ("bench.concurrency=[1, 2, 4]", ["bench", "concurrency"], [1, 2, 4]),
        ("service.sim={time_scale: 0.1}", ["service", "sim"], {"time_scale": 0.1}),
        ("env.HF_TOKEN=null", ["env", "HF_TOKEN"], None),
        ("description=", ["description"], ""),
        ("description=a=b", ["description"], "a=b"),
        (
            'service.args."compilation-config.mode"=3',
            ["service", "args", "compilation-config.mode"],
            3,
        ),
        ("smoke.0.max_tokens=64", ["smoke", "0", "max_tokens"], 64),
        ("name=kimi", ["name"], "kimi"),
    ],
)
def test_parse_set(text: str, path: list[str], value: Any) -> None:
    assert parse_set(text) == (path, value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("service.port", "expected PATH=VALUE"),
        ("=1", "empty segment"),
        ("service..port=1", "empty segment"),
        ("service.=1", "empty segment"),
        ('service."port=1', "unterminated quote"),
        ('service."a"b=1', "a quoted segment must end"),
        ("bench.concurrency=[1, 2", "not valid YAML"),
    ],
)
def test_parse_set_errors_name_the_argument(text: str, fragment: str) -> None:
    with pytest.raises(PlanError) as raised:
        parse_set(text)
    assert raised.value.file == f"--set {text}"
    assert fragment in str(raised.value)
    assert "^" in (raised.value.snippet or "")


BASE: dict[str, Any] = {
    "name": "p",
    "service": {"model": "m", "args": {"tp": 8}},
    "smoke": [{"name": "a", "prompt": "x"}, {"name": "b", "prompt": "y"}],
}


@pytest.mark.parametrize(
    ("path", "value", "check_path", "expected", "field_path"),
    [
        (["service", "port"], 8001, ("service", "port"), 8001, ("service", "port")),
        (
            ["service", "args"],
            {"ep": True},
            ("service", "args"),
            {"tp": 8, "ep": True},
            ("service", "args"),
        ),
        (["service", "args", "tp"], None, ("service", "args"), {}, ("service", "args", "tp")),
        (["bench", "mode"], "batch", ("bench",), {"mode": "batch"}, ("bench", "mode")),
        (
            ["smoke", "1", "max_tokens"],
            64,
            ("smoke", 1),
            {"name": "b", "prompt": "y", "max_tokens": 64},
            ("smoke", 1, "max_tokens"),
        ),
        (["smoke", "0"], {"prompt": "z"}, ("smoke", 0), {"name": "a", "prompt": "z"}, ("smoke", 0)),
        (["smoke"], [], ("smoke",), [], ("smoke",)),
        (["bench", "slo", "ttft_ms"], None, ("name",), "p", ("bench", "slo", "ttft_ms")),
    ],
)
def test_apply_set(
    path: list[str],
    value: Any,
    check_path: tuple[Any, ...],
    expected: Any,
    field_path: tuple[Any, ...],
) -> None:
    before = copy.deepcopy(BASE)
    result, resolved = apply_set(BASE, path, value, argument="--set x")
    assert before == BASE  # pure
    assert get_path(result, check_path) == (True, expected)
    assert resolved == field_path
    if path == ["bench", "slo", "ttft_ms"]:
        assert "bench" not in result  # deleting below nothing creates nothing


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        (["name", "first"], "name is the string 'p', so it has no field 'first'"),
        (["smoke", "x", "name"], "smoke is a list; index it with a number"),
        (["smoke", "2", "name"], "index 2 is out of range (the list has 2 items)"),
        (["smoke", "0", "name", "x"], "smoke.0.name is the string 'a'"),
    ],
)
def test_apply_set_errors(path: list[str], fragment: str) -> None:
    with pytest.raises(PlanError) as raised:
        apply_set(BASE, path, 1, argument="--set " + ".".join(path) + "=1")
    assert fragment in str(raised.value)
    assert raised.value.file == "--set " + ".".join(path) + "=1"


def _origins_of(layer: dict[str, Any], name: str) -> dict[tuple[Any, ...], str]:
    out: dict[tuple[Any, ...], str] = {}

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        out[path] = name
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, index))

    walk(layer, ())
    return out


def test_update_origins_follows_the_merge_rules() -> None:
    base = {"install": {"packages": ["a==1", "b==1"], "clean": True}, "env": {"X": "1", "Y": "2"}}
    top = {"install": {"packages": ["c==1"]}, "env": {"Y": None}}
    origins = update_origins({}, {}, (), base, _origins_of(base, "base").get)
    origins = update_origins(origins, base, (), top, _origins_of(top, "top").get)
    assert origins[("install", "packages")] == "top"
    assert origins[("install", "packages", 0)] == "top"
    assert ("install", "packages", 1) not in origins  # the base's list is gone
    assert origins[("install", "clean")] == "base"  # maps merge
    assert origins[("install",)] == "top"
    assert origins[("env", "X")] == "base"
    assert ("env", "Y") not in origins  # deleted


@given(_maps, _maps)
def test_every_merged_path_has_an_origin(base: dict[str, Any], top: dict[str, Any]) -> None:
    origins = update_origins({}, {}, (), base, _origins_of(base, "base").get)
    origins = update_origins(origins, base, (), top, _origins_of(top, "top").get)
    merged = merge(base, top)
    for path in _origins_of(merged, "?"):
        assert path in origins
    for path in origins:
        assert get_path(merged, path)[0], path
