"""Fixtures shared by every test directory. Keep this file small: fixtures live in
tests/fixtures/, one module per concept, and are registered here."""

from __future__ import annotations

import pytest

pytest_plugins = ["fixtures.sshd", "fixtures.netns", "fixtures.transports"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-heavy", action="store_true",
        help="also run the tests that need the whole real vLLM venv with torch (about 11 GB, "
             "made once in ~/.cache/orch/real): `scripts/test --real`",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    heavy = config.getoption("--real-heavy")
    skip = pytest.mark.skip(reason="needs the whole real vLLM venv: run `scripts/test --real`")
    for item in items:  # a slow module says so itself: `pytestmark = pytest.mark.slow`
        if "real_heavy" in item.keywords and not heavy:
            item.add_marker(skip)
    # The real vLLM module is the longest file (one server, several start-ups): first, so one
    # worker runs it while the other works through the rest.
    items.sort(key=lambda item: "real_vllm" not in item.keywords)
