"""The host keeps the fact program compiled (facts/compiled.py): the real HOST_PYTHON script
on this machine's python3, with HOME in a temporary folder."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.facts import ProbeRequest, build_stdin, parse_answer
from orchestrator.facts.compiled import digest
from orchestrator.facts.probe import HOST_PYTHON
from orchestrator.facts.program import program_source


def _probe(home: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", HOST_PYTHON.raw()], input=stdin, capture_output=True,
                          env={**os.environ, "HOME": str(home)}, timeout=60, check=False)


def _kept(home: Path) -> Path:
    return home / ".orch" / "cache" / (
        f"probe-{digest(program_source())}-{sys.implementation.cache_tag}.bin")


def test_the_first_probe_keeps_the_compiled_program_and_the_next_runs_it(tmp_path: Path) -> None:
    request = build_stdin(ProbeRequest(venv=sys.prefix, files={str(tmp_path / "f"): None}))
    first = _probe(tmp_path, request)
    assert first.returncode == 0, first.stderr
    assert _kept(tmp_path).is_file()
    # The kept code is what runs: a stand-in under the program's digest answers instead.
    _kept(tmp_path).write_bytes(marshal.dumps(compile("import json\ndef main(request): print('kept')",
                                                      "<t>", "exec")))
    second = _probe(tmp_path, request)
    assert second.stdout.decode().strip() == "kept"


def test_a_damaged_or_unwritable_cache_costs_only_the_compile(tmp_path: Path) -> None:
    request = build_stdin(ProbeRequest(venv=sys.prefix))
    _kept(tmp_path).parent.mkdir(parents=True)
    _kept(tmp_path).write_bytes(b"not marshal data")
    damaged = _probe(tmp_path, request)
    assert damaged.returncode == 0, damaged.stderr
    assert parse_answer(damaged.stdout.decode()).venv is not None
    assert marshal.loads(_kept(tmp_path).read_bytes()) is not None  # compiled again, kept
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    unwritable = _probe(home, request)
    assert unwritable.returncode == 0, unwritable.stderr
    assert parse_answer(unwritable.stdout.decode()).venv is not None


def test_an_older_program_is_removed_when_a_new_one_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / ".orch" / "cache"
    folder.mkdir(parents=True)
    (folder / "probe-0ld-cpython-311.bin").write_bytes(b"")
    (folder / "other.txt").write_text("not orch's probe")
    assert _probe(tmp_path, build_stdin(ProbeRequest())).returncode == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted([_kept(tmp_path).name, "other.txt"])


def test_the_input_is_still_a_plain_program() -> None:
    done = subprocess.run([sys.executable, "-S", "-"], input=build_stdin(ProbeRequest()),
                          capture_output=True, timeout=60, check=True)
    assert parse_answer(done.stdout.decode()).host.python
