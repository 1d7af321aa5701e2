"""What a restart or a replace changes, as `orch plan` shows it: command lines in, diff lines
out, for both launches orch renders (`... serve MODEL` and a server module's `--model M`)."""

from __future__ import annotations

import pytest

from orchestrator.service.spec_diff import argv_changes, flags

CASES = [
    (["/a/bin/vllm", "serve", "m", "--port", "1"], ["/a/bin/vllm", "serve", "m", "--port", "2"],
     ["~ --port: 1 -> 2"]),
    (["/a/bin/orch", "sim", "serve", "m"], ["/b/bin/orch", "sim", "serve", "m"],
     ["~ program: /a/bin/orch sim serve -> /b/bin/orch sim serve"]),
    (["/v/bin/python", "-m", "vllm.x.entry", "--model", "/m", "--dtype", "bfloat16"],
     ["/v/bin/python", "-m", "vllm.x.entry", "--model", "/n"],
     ["~ model: /m -> /n", "- --dtype bfloat16"]),
    (["/v/bin/vllm", "serve", "m", "--enforce-eager"],
     ["/v/bin/python", "-m", "vllm.x.entry", "--model", "m", "--enforce-eager"],
     ["~ program: /v/bin/vllm serve -> /v/bin/python -m vllm.x.entry"]),
]


@pytest.mark.parametrize(("before", "after", "lines"), CASES)
def test_argv_changes(before: list[str], after: list[str], lines: list[str]) -> None:
    assert argv_changes(before, after) == lines


def test_a_server_modules_model_is_not_a_flag() -> None:
    assert flags(["/v/bin/python", "-m", "e", "--model", "/m", "--a", "1", "2", "--b"]) == (
        "/m", {"--a": ["1 2"], "--b": [""]})
