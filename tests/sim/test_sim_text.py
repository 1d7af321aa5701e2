"""What the simulated model says: deterministic text, known tasks answered correctly."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.sim.answers import answer_for, python_function, requested_name
from orchestrator.sim.textgen import (
    THINK_END,
    THINK_START,
    build_script,
    count_tokens,
    split_pieces,
)


@given(st.text())
def test_pieces_concatenate_to_the_text(text: str) -> None:
    assert "".join(split_pieces(text)) == text


def test_the_same_prompt_and_key_give_the_same_response() -> None:
    a = build_script("Why is the sky blue?", "7", True)
    b = build_script("Why is the sky blue?", "7", True)
    assert a.inline_text(a.natural_tokens) == b.inline_text(b.natural_tokens)
    c = build_script("Why is the sky blue?", "8", True)
    assert c.inline_text(c.natural_tokens) != a.inline_text(a.natural_tokens)


def test_thinking_off_gives_only_the_answer() -> None:
    on = build_script("Why is the sky blue?", "1", True)
    off = build_script("Why is the sky blue?", "1", False)
    reasoning, answer = off.parts(off.natural_tokens)
    assert reasoning is None and answer and "scatter" in answer
    assert off.natural_tokens < on.natural_tokens
    assert on.parts(on.natural_tokens)[1] == answer  # the same answer follows the reasoning


def test_inline_text_wraps_the_reasoning_in_think_tags() -> None:
    script = build_script("Hello", "3", True)
    text = script.inline_text(script.natural_tokens)
    assert text.startswith(THINK_START) and THINK_END in text
    cut = script.inline_text(5)  # still thinking: no closing tag yet
    assert cut.startswith(THINK_START) and THINK_END not in cut


def code_of(prompt: str) -> str:
    script = build_script(prompt, "0", True)
    _, answer = script.parts(script.natural_tokens)
    assert answer is not None
    match = re.search(r"```python\n(.*?)```", answer, re.S)
    assert match, answer
    return match.group(1)


@pytest.mark.parametrize(
    ("prompt", "name", "calls"),
    [
        ("Write a Python function add(a, b).", "add", [((2, 3), 5), ((-1, 1), 0)]),
        ("Write a Python function named plus_two_numbers that adds two numbers.",
         "plus_two_numbers", [((4, 5), 9)]),
        ("Write a python function called mul that multiplies two numbers", "mul", [((3, 4), 12)]),
        ("In Python, write a function `reverse_string(s)` that reverses a string.",
         "reverse_string", [(("abc",), "cba"), (("",), "")]),
        ("Write a Python function fibonacci(n) returning the n-th Fibonacci number.",
         "fibonacci", [((0,), 0), ((1,), 1), ((10,), 55)]),
        ("Write a Python function is_prime(n).", "is_prime",
         [((1,), False), ((2,), True), ((9,), False), ((97,), True)]),
        ("Write a Python function named fib that computes Fibonacci numbers", "fib", [((7,), 13)]),
    ],
)  # fmt: skip
def test_known_tasks_are_answered_correctly(prompt: str, name: str, calls: list[tuple[tuple[object, ...], object]]) -> None:
    namespace: dict[str, object] = {}
    exec(code_of(prompt), namespace)
    function = namespace[name]
    assert callable(function)
    for args, expected in calls:
        assert function(*args) == expected


def test_an_unknown_task_gets_a_stub_that_fails_checks() -> None:
    name, source = python_function("Write a Python function named sort_words that sorts words.")
    namespace: dict[str, object] = {}
    exec(source, namespace)
    assert name == "sort_words"
    assert namespace["sort_words"]("b a") is None  # type: ignore[operator]


@pytest.mark.parametrize(
    ("prompt", "name"),
    [("a function named foo_bar", "foo_bar"), ("def baz(x):", "baz"), ("call `qux(1)`", "qux"),
     ("no name here", None)],
)  # fmt: skip
def test_requested_names(prompt: str, name: str | None) -> None:
    assert requested_name(prompt) == name


def test_sky_and_json_prompts() -> None:
    assert "Rayleigh scattering" in answer_for("Why is the sky blue?").core
    script = build_script("Reply in JSON please", "0", True)
    _, answer = script.parts(script.natural_tokens)
    assert json.loads(answer or "") == {"answer": "ok", "simulated": True}


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("hello", 1), ("hello, world!", 4),
                                               ("internationalization", 3)])  # fmt: skip
def test_token_counts(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


@given(st.sampled_from(["hi", "Why is the sky blue?", "Write a Python function add(a, b)."]),
       st.integers(0, 30), st.booleans(), st.integers(0, 9000))  # fmt: skip
def test_whole_texts_equal_the_streamed_pieces(prompt: str, key: int, thinking: bool, count: int) -> None:
    script = build_script(prompt, str(key), thinking)
    reasoning, answer = script.parts(count)
    if thinking:
        pieces = [script.reasoning_piece(i) for i in range(min(count, script.reasoning_count))]
        assert reasoning == "".join(pieces)
        start = script.answer_start
        expected = None if count < start else "".join(script.answer_piece(j) for j in range(count - start))
    else:
        assert reasoning is None
        expected = "".join(script.answer_piece(j) for j in range(count))
    assert answer == expected
