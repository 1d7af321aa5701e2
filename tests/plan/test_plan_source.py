"""YAML read with positions: every key and value keeps its line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import PlanError
from orchestrator.plan.source import Origin, parse_document, read_document, snippet

TEXT = """\
name: p            # a comment
service:
  model: m
  args: {tensor-parallel-size: 8}
smoke:
  - name: a
    prompt: hi
on: yes
"""


def test_positions_of_keys_and_values() -> None:
    doc = parse_document(TEXT, "p.yaml")
    assert doc.keys[("service", "model")] == Origin("p.yaml", 3, 3)
    assert doc.values[("service", "model")] == Origin("p.yaml", 3, 10)
    assert doc.keys[("service", "args", "tensor-parallel-size")] == Origin("p.yaml", 4, 10)
    assert doc.values[("service", "args", "tensor-parallel-size")] == Origin("p.yaml", 4, 32)
    assert doc.keys[("smoke", 0)] == Origin("p.yaml", 6, 5)
    assert doc.keys[("smoke", 0, "prompt")] == Origin("p.yaml", 7, 5)
    assert str(doc.keys[("smoke", 0, "prompt")]) == "p.yaml:7"


def test_keys_are_taken_as_written() -> None:
    doc = parse_document(TEXT, "p.yaml")
    assert doc.data["on"] is True  # values follow YAML
    assert "on" in doc.data  # keys stay names (YAML 1.1 would make this key True)


def test_merge_keys_are_resolved_and_may_be_overridden() -> None:
    doc = parse_document("a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  c: 3\n", "m.yaml")
    assert doc.data["d"] == {"b": 1, "c": 3}


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' (first at line 1)", 3),
        ("a:\n\t- b\n", "YAML syntax error", 2),
        ("a: [1, 2\n", "YAML syntax error", 1),
        ("? [a, b]\n: 1\n", "a key must be a plain name", 1),
        ("a: 1\n---\nb: 2\n", "YAML syntax error", 2),
        ("", "the file is empty", None),
        ("# only a comment\n", "the file is empty", None),
        ("[1, 2]\n", "the top level must be a mapping of keys, got a list", 1),
        ("a: !!python/object:os.system x\n", "YAML syntax error", 1),
        ("a: &a [*a]\n", "nested more than", 1),
    ],
)
def test_parse_errors(text: str, fragment: str, line: int | None) -> None:
    with pytest.raises(PlanError) as raised:
        parse_document(text, "bad.yaml")
    assert fragment in str(raised.value)
    assert raised.value.file == "bad.yaml"
    assert raised.value.line == line


@pytest.mark.slow
def test_alias_bombs_are_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    with pytest.raises(PlanError, match="holds more than 100,000 values"):
        parse_document("\n".join(lines) + "\n", "bomb.yaml")


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"plan file not found: .*nope\.yaml"):
        read_document(tmp_path / "nope.yaml", what="plan file")
    with pytest.raises(PlanError, match="is a directory"):
        read_document(tmp_path)
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(PlanError, match="not UTF-8"):
        read_document(binary)


def test_snippet_puts_the_caret_under_the_column() -> None:
    text = "a: 1\n  port: eighty\n"
    assert snippet(text, 2, 9) == "  2 |   port: eighty\n    |         ^"
    assert snippet("\tx: 1\n", 1, 2) == "  1 | \tx: 1\n    | \t^"
    assert snippet(text, 9, 1) == ""
