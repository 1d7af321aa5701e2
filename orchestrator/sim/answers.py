"""What the simulated model answers: a few prompts it understands, pseudo-text for the rest.

Known prompts (case-insensitive):
- a Python function (the prompt says "python" and "function" or "def"): a fenced ```python
  block defining the function under the name the prompt asks for ("named X", "called X",
  "`X(`", "def X"). It is correct for these tasks: add, multiply, reverse a string,
  fibonacci (fibonacci(0) == 0, fibonacci(1) == 1), is_prime. Any other task gets a stub
  that returns None, so a check that runs the code fails, as it should.
- "sky" and "blue": Rayleigh scattering ("scatter" appears in the content).
- "json": a small JSON object and nothing else.
Everything else: a sentence, then deterministic pseudo-text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME_PATTERNS = (
    re.compile(r"\b(?:named|called)\s+[`'\"]?([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)\s*\("),
    re.compile(r"\bdef\s+([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"\bfunction\s+[`'\"]?([A-Za-z_][A-Za-z0-9_]*)\s*\("),
)

# task -> (default name, parameters, docstring, body lines)
_TASKS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "is_prime": (
        "is_prime",
        "n",
        "Return True if n is a prime number.",
        (
            "if n < 2:",
            "    return False",
            "i = 2",
            "while i * i <= n:",
            "    if n % i == 0:",
            "        return False",
            "    i += 1",
            "return True",
        ),
    ),
    "fibonacci": (
        "fibonacci",
        "n",
        "Return the n-th Fibonacci number (fibonacci(0) == 0, fibonacci(1) == 1).",
        ("a, b = 0, 1", "for _ in range(n):", "    a, b = b, a + b", "return a"),
    ),
    "reverse": (
        "reverse_string",
        "s",
        "Return the string s reversed.",
        ("return s[::-1]",),
    ),
    "multiply": ("multiply", "a, b", "Return the product of a and b.", ("return a * b",)),
    "add": ("add", "a, b", "Return the sum of a and b.", ("return a + b",)),
}

# Checked in this order, first against the requested name, then against the prompt.
_TASK_HINTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("is_prime", ("prime",)),
    ("fibonacci", ("fibonacci", "fib")),
    ("reverse", ("reverse", "rev")),
    ("multiply", ("multipl", "product", "mul", "times")),
    ("add", ("add", "sum", "plus")),
)


@dataclass(frozen=True)
class Answer:
    """The visible answer: its core text, and whether pseudo-text may follow it."""

    kind: str  # "code", "rayleigh", "json" or "text"
    core: str
    padded: bool = True
    topic: str = ""


def is_code_request(prompt: str) -> bool:
    lower = prompt.lower()
    return "python" in lower and bool(re.search(r"\bfunction\b|\bdef\b", lower))


def requested_name(prompt: str) -> str | None:
    for pattern in _NAME_PATTERNS:
        match = pattern.search(prompt)
        if match and match.group(1).lower() not in {"a", "an", "the", "that", "which"}:
            return match.group(1)
    return None


def detect_task(prompt: str, name: str | None) -> str | None:
    lower = prompt.lower()
    for source in (name.lower() if name else "", lower):
        for task, hints in _TASK_HINTS:
            if source and any(hint in source for hint in hints):
                return task
    return None


def python_function(prompt: str) -> tuple[str, str]:
    """(function name, source) answering a request for a Python function."""
    name = requested_name(prompt)
    task = detect_task(prompt, name)
    if task is None:
        fname = name or "solve"
        doc = "Not a task this simulator knows: it returns None."
        source = f'def {fname}(*args):\n    """{doc}"""\n    return None\n'
        return fname, source
    default, params, doc, body = _TASKS[task]
    fname = name or default
    lines = [f"def {fname}({params}):", f'    """{doc}"""', *("    " + line for line in body)]
    return fname, "\n".join(lines) + "\n"


def topic_of(prompt: str, words: int = 12) -> str:
    found = prompt.split()
    text = " ".join(found[:words])
    return text + ("..." if len(found) > words else "")


def answer_for(prompt: str) -> Answer:
    lower = prompt.lower()
    topic = topic_of(prompt)
    if is_code_request(prompt):
        name, source = python_function(prompt)
        core = f"Here is the function `{name}`:\n\n```python\n{source}```\n\nHow it works:"
        return Answer("code", core, True, topic)
    if "sky" in lower and "blue" in lower:
        core = (
            "The sky looks blue because of Rayleigh scattering: the molecules of the air "
            "scatter the short blue wavelengths of sunlight far more strongly than the long "
            "red ones, so scattered blue light reaches the eye from every part of the sky."
        )
        return Answer("rayleigh", core, True, topic)
    if "json" in lower:
        return Answer("json", '{"answer": "ok", "simulated": true}', False, topic)
    return Answer("text", "Here is a detailed answer.", True, topic)
