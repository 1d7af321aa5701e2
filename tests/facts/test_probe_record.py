"""RECORD verification on the host: CSV rows, the stat-signature cache, and what defeats it.

Real venvs, real pip installs of wheels built here, the real fact program run by the local
transport (the same program the SSH transport ships)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.wheels import make_wheel

from orchestrator.facts import Facts, ProbeRequest, probe
from orchestrator.facts.installed_files import RACY_WINDOW_NS, RECORD_CACHE, record_rows
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.transport import connect

pytestmark = pytest.mark.slow

COMMA_PATH = "orchtest_commas/configs/E=1,N=14336,device_name=NVIDIA_A100-SXM4-80GB.json"


def test_record_rows_read_quoted_paths_with_commas() -> None:
    text = (
        '"vllm/configs/E=1,N=14336,device_name=X.json",sha256=abc,2751\n'
        "vllm/__init__.py,sha256=def,10\n"
        "vllm-0.17.1.dist-info/RECORD,,\n"
        "vllm/__pycache__/x.pyc,,\n"
    )
    assert record_rows(text) == [
        ("vllm/configs/E=1,N=14336,device_name=X.json", "sha256=abc"),
        ("vllm/__init__.py", "sha256=def"),
    ]


def _pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check",
                    *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("record")
    wheel = make_wheel(root / "wheels", "orchtest-commas", "1.0.0",
                       extra_files={COMMA_PATH: b'{"1": {"BLOCK_SIZE_M": 16}}\n',
                                    "orchtest_commas/big.py": b"x = 1\n" * 5000})
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", "--no-index", str(wheel))
    # Files changed within the timestamp granularity are hashed again next time (git's
    # "racily clean"): let the install age past that window once for the whole module.
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.1)
    return venv


def _probe(venv: Path, *, verify_all: bool = False) -> Facts:
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    return probe(transport, ProbeRequest(venv=str(venv), record=["orchtest-commas"],
                                         verify_all=verify_all))


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


def test_a_converged_venv_with_comma_paths_has_nothing_missing(venv: Path) -> None:
    facts = _probe(venv)
    record = facts.record["orchtest-commas"]
    assert (record.modified, record.missing) == ([], [])
    assert (_site(venv) / COMMA_PATH).exists()


def test_the_second_probe_hashes_nothing_and_the_cache_lives_in_the_venv(venv: Path) -> None:
    _probe(venv, verify_all=True)
    assert (venv / RECORD_CACHE).is_file()
    facts = _probe(venv)
    assert facts.record_stats["files"] >= 5
    assert facts.record_stats["hashed"] == 0
    assert facts.record["orchtest-commas"].modified == []


def test_verify_all_hashes_every_file(venv: Path) -> None:
    facts = _probe(venv, verify_all=True)
    assert facts.record_stats["hashed"] == facts.record_stats["files"]


def test_a_patch_in_place_is_found_even_with_size_and_mtime_put_back(venv: Path) -> None:
    _probe(venv)  # cached
    target = _site(venv) / "orchtest_commas" / "big.py"
    before = target.stat()
    original = target.read_bytes()
    try:
        target.write_bytes(original.replace(b"x = 1", b"x = 2", 1))  # same size
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -r
        facts = _probe(venv)
        assert facts.record["orchtest-commas"].modified == ["orchtest_commas/big.py"]
        # Still found on the next run: a bad file never enters the cache.
        assert _probe(venv).record["orchtest-commas"].modified == ["orchtest_commas/big.py"]
    finally:
        target.write_bytes(original)
    assert _probe(venv).record["orchtest-commas"].modified == []


def test_a_deleted_file_is_missing(venv: Path) -> None:
    target = _site(venv) / COMMA_PATH
    data = target.read_bytes()
    target.unlink()
    try:
        assert _probe(venv).record["orchtest-commas"].missing == [COMMA_PATH]
    finally:
        target.write_bytes(data)


def test_a_reinstall_is_hashed_in_full(venv: Path, tmp_path: Path) -> None:
    _probe(venv)
    wheel = next((venv.parent / "wheels").glob("*.whl"))
    _pip(venv, "install", "--no-index", "--force-reinstall", str(wheel))
    facts = _probe(venv)
    # RECORD was rewritten: no file is trusted on its old signature.
    assert facts.record_stats["hashed"] == facts.record_stats["files"]
    assert facts.record["orchtest-commas"].modified == []


def test_a_corrupt_cache_is_ignored(venv: Path) -> None:
    (venv / RECORD_CACHE).write_text("{not json")
    facts = _probe(venv)
    assert facts.record["orchtest-commas"].modified == []
    assert facts.record_stats["hashed"] == facts.record_stats["files"]
