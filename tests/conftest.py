"""Fixtures shared by every test directory. Keep this file small: fixtures live in
tests/fixtures/, one module per concept, and are registered here."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["fixtures.sshd", "fixtures.netns", "fixtures.transports", "fixtures.masking",
                  "fixtures.tmpfs"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-heavy", action="store_true",
        help="also run the tests that need the whole real vLLM venv with torch (about 11 GB, "
             "made once in ~/.cache/orch/real) and the real vLLM modules beyond the default "
             "suite's one (tune, warm restart, fleet): `scripts/test --real`",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    heavy = config.getoption("--real-heavy")
    skip = pytest.mark.skip(reason="needs the whole real vLLM venv: run `scripts/test --real`")
    more = pytest.mark.skip(reason="more real vLLM start-ups than the default suite's one "
                                   "module: run `scripts/test --real`")
    for item in items:  # a slow module says so itself: `pytestmark = pytest.mark.slow`
        if "real_heavy" in item.keywords and not heavy:
            item.add_marker(skip)
        elif "real_more" in item.keywords and not heavy:
            item.add_marker(more)
    # Longest file first (scripts/test runs whole files on workers, in this order: with
    # --no-loadscope-reorder), so no worker is left alone with a long file at the end.
    seconds = _durations()
    per_file: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        per_file[path] = per_file.get(path, 0.0) + _UNKNOWN_TEST_S
    cost = {path: seconds.get(path, guess) for path, guess in per_file.items()}
    items.sort(key=lambda item: (-cost[item.nodeid.split("::", 1)[0]],
                                 item.nodeid.split("::", 1)[0]))


_UNKNOWN_TEST_S = 0.1  # a file the durations table does not know: this much a test


def _durations() -> dict[str, float]:
    """tests/durations.tsv: seconds per test file in a whole run."""
    table = Path(__file__).with_name("durations.tsv")
    found: dict[str, float] = {}
    for line in table.read_text().splitlines() if table.exists() else []:
        if line and not line.startswith("#"):
            path, seconds = line.split("\t")
            found[path] = float(seconds)
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """ORCH_TEST_TIMELINE=FILE: each test's worker, start and end (seconds since the epoch)
    and CPU seconds (the worker's and its waited-for children's: orch runs, sshd, simulators
    it started; not daemons they left) appended to FILE, to see where a run's workers sat
    idle and what used the cores (scripts/test_timeline.py)."""
    timeline = os.environ.get("ORCH_TEST_TIMELINE")
    started, cpu = time.time(), _cpu_seconds()
    try:
        return (yield)
    finally:
        if timeline:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            used = _cpu_seconds() - cpu
            with open(timeline, "a") as out:
                out.write(f"{worker}\t{started:.3f}\t{time.time():.3f}\t{item.nodeid}"
                          f"\t{used:.3f}\n")


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
