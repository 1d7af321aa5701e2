"""Fixtures shared by every test directory. Keep this file small: fixtures live in
tests/fixtures/, one module per concept, and are registered here."""

from __future__ import annotations

import pytest

pytest_plugins = ["fixtures.sshd", "fixtures.netns"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-heavy", action="store_true",
        help="also run the tests that need the whole real vLLM venv with torch (about 11 GB, "
             "made once in ~/.cache/orch/real): `scripts/test --real`",
    )


# Where the time goes (a real sshd with real venvs, real packages, simulated start-ups and
# sweeps): `scripts/test --fast` leaves these out for the edit loop.
SLOW = ("e2e/", "real/", "report/", "bench/test_bench_sim.py", "bench/test_bench_stream.py",
        "sim/test_sim_throughput.py", "sim/test_sim_failures.py", "probe/test_probe_record.py",
        "hostile/test_hostile_corpus.py", "hostile/test_full_disk.py", "core/test_live_view.py",
        "core/test_init.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    heavy = config.getoption("--real-heavy")
    skip = pytest.mark.skip(reason="needs the whole real vLLM venv: run `scripts/test --real`")
    for item in items:
        where = item.path.as_posix().split("/tests/", 1)[-1]
        if where.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if "real_heavy" in item.keywords and not heavy:
            item.add_marker(skip)
