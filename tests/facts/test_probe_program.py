"""The fact program as assembled from orchestrator/facts/: one text of the modules' host
sides, Python 3.8 syntax, no orch import, every fact's gatherer called; run for real by the
local transport on one request that asks for every fact, and read back by each fact's parser;
run by a real Python 3.8 where this machine has one."""

from __future__ import annotations

import ast
import glob
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.engines.vllm.builds import BUILD_PATTERN as VLLM_BUILDS
from orchestrator.facts import (
    Facts,
    ProbeRequest,
    build_stdin,
    parse_answer,
    probe,
    program_source,
)
from orchestrator.facts.program import clashes, discovered, host_side
from orchestrator.transport.local import LocalTransport


def test_the_program_is_python_38_without_orch_imports_or_controller_code() -> None:
    source = program_source()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {str(n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {name for name in imported if name.startswith("orchestrator")}
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assert {"main", "read_text", "host_facts", "record_rows", "start_collect_env"} <= defined
    assert not defined & {"HostFacts", "ServiceFacts", "parse", "parse_nvidia_smi_q"}


def test_no_two_host_sides_define_one_name() -> None:
    """The program is their texts one after the other: a second definition would replace the
    first without a word (assembly does not check it, to stay cheap: this test does)."""
    assert clashes() == []


def test_every_fact_has_its_gatherer_on_the_host_side() -> None:
    facts = discovered()
    assert len(facts) == 11  # host, venv, venv_trust, record, engine_build, files, service, guards, model,
    # compile_cache, install_record
    source = program_source()
    for fact in facts:
        assert f"def {fact.gather}(request" in source
    called = source.rsplit("GATHER.extend(", 1)[1]
    assert all(fact.gather in called for fact in facts)
    assert host_side("answer") is None  # controller only


def test_asks_of_a_fact_without_a_field_reach_the_host_and_merge() -> None:
    one, two = ProbeRequest(asks={"disk": {"path": "/"}}), ProbeRequest(asks={"numa": True})
    merged = one.merge(two)
    assert merged.to_json()["disk"] == {"path": "/"} and merged.to_json()["numa"] is True
    assert ProbeRequest(engine_builds=VLLM_BUILDS).to_json()["engine_builds"] == VLLM_BUILDS


def test_one_probe_answers_every_fact(tmp_path: Path) -> None:
    wanted = tmp_path / "wanted.txt"
    wanted.write_text("hello\n")
    digest = hashlib.sha256(b"hello\n").hexdigest()
    request = ProbeRequest(
        venv=sys.prefix, interpreter="sh", record=["pytest"], engine_builds=VLLM_BUILDS,
        files={str(wanted): digest, str(tmp_path / "absent"): None},
        service={"pidfile": str(tmp_path / "pid"), "port": 1},
        guards={"made": {"creates": str(wanted)}, "ok": {"unless": ["true"]}},
        units={"ray": {"pidfile": str(tmp_path / "ray.pid")}},
    )
    facts = probe(LocalTransport("local"), request)
    assert isinstance(facts, Facts) and facts.host.hostname and facts.host.cpu_count
    assert facts.venv is not None and facts.venv.exists and "pytest" in facts.venv.installed()
    assert facts.venv.interpreter_path is not None
    assert facts.record["pytest"].missing == [] and facts.record_stats["files"] > 0
    assert facts.engine_build is None  # no vLLM in this venv
    assert facts.files[str(wanted)].sha256 == digest
    assert not facts.files[str(tmp_path / "absent")].exists
    assert facts.service is not None and facts.service.pid is None
    assert facts.service.port is not None and not facts.service.port.listening
    assert set(facts.units) == {"ray"}
    assert {name: g.met for name, g in facts.guards.items()} == {"made": True, "ok": True}
    assert facts.probe_seconds > 0


def test_each_parser_reads_only_its_own_keys() -> None:
    facts = parse_answer('{"probe_version": 1, "guards": {"g": {"met": false, "why": "no"}}}')
    assert facts.venv is None and facts.service is None and facts.engine_build is None
    assert facts.files == {} and facts.record == {} and facts.units == {}
    assert facts.guards["g"].why == "no" and facts.host.hostname == ""


def _python38() -> str | None:
    """A Python 3.8 on this machine (the oldest a host may have), if one runs."""
    candidates = [shutil.which("python3.8"),
                  *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.8*/bin/python3.8")))]
    for path in filter(None, candidates):
        if subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
            return path
    return None


def test_the_program_runs_on_python_38(tmp_path: Path) -> None:
    python = _python38()
    if python is None:
        pytest.skip("no Python 3.8 here")
    request = ProbeRequest(venv=sys.prefix, interpreter="sh", record=["pytest"], engine_builds=VLLM_BUILDS,
                           files={str(tmp_path / "f"): None}, service={"port": 1},
                           guards={"g": {"unless": ["true"]}})
    done = subprocess.run([python, "-S", "-"], input=build_stdin(request), capture_output=True,
                          check=True)
    facts = parse_answer(done.stdout.decode())
    assert facts.host.python.startswith("3.8.") and facts.guards["g"].met
    assert facts.venv is not None and facts.record["pytest"].missing == []


def test_modules_only_some_facts_need_are_imported_on_first_use() -> None:
    from orchestrator.facts.program import LAZY

    check = (
        "import sys\n"
        f"print(sorted(m for m in {LAZY!r} if m in sys.modules))\n"
        "print(subprocess.run(['true']).returncode, 'subprocess' in sys.modules)\n"
        "print(type(ast.parse('x = 1')).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-S", "-c",
                           "import sys; exec(compile(sys.stdin.buffer.read(), '<orch>', 'exec'))"],
                          input=(program_source() + check).encode(), capture_output=True,
                          timeout=60, check=True)
    assert done.stdout.decode().splitlines() == ["[]", "0 True", "Module"]
