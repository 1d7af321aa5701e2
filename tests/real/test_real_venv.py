"""The real packages as the reference (light part, in CI): vLLM 0.17.1, flashinfer-python and
flashinfer-cubin wheels from the index, installed `--no-deps` into a real venv and converged by
`orch` over the loopback sshd. Their RECORDs (519 vLLM paths hold commas), files, metadata and
sources are all real; only torch and the CUDA libraries are left out (tests/real's heavy part
has them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.realpkgs import (
    FLASHINFER,
    LIGHT_PINS,
    OLD_CUBIN,
    OLD_FLASHINFER,
    UV,
    VLLM,
    install_light,
    wheel,
    wheels_dir,
)
from fixtures.sshd import SshServer

from orchestrator.engines.vllm import names as vllm_names
from orchestrator.engines.vllm.builds import BUILD_PATTERN
from orchestrator.facts import ProbeRequest, probe
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.transport import connect

API_SERVER = "vllm/entrypoints/openai/api_server.py"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, sshd: SshServer) -> Path:
    """A work folder with an inventory of one loopback host and a real vLLM venv."""
    work = tmp_path_factory.mktemp("real")
    install_light(work / "venv")
    shutil.copy(UV, work / "venv" / "bin" / "uv")  # the venv's installer (no index here)
    write_inventory(work / "inventory.yaml", sshd.inventory(1))
    return work


def _plan(work: Path, packages: list[str], **install: object) -> Path:
    plan = {
        "name": "real",
        "hosts": "all",
        "python": {"venv": str(work / "venv"), "interpreter": "python3", "installer": "uv"},
        "install": {"packages": packages, "find_links": [str(wheels_dir())], "no_index": True,
                    "clean": True, **install},
    }
    path = work / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _orch(work: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return orch(*args, "-i", work / "inventory.yaml", cwd=work)


def _site(work: Path) -> Path:
    return next((work / "venv" / "lib").glob("python*/site-packages"))


def _uv(work: Path, *specs: Path) -> None:
    subprocess.run([str(UV), "pip", "install", "--quiet", "--python", str(work / "venv" / "bin" / "python"),
                    "--no-deps", "--link-mode", "copy", *map(str, specs)], check=True)


def test_the_real_vllm_record_quotes_paths_with_commas() -> None:
    import zipfile

    with zipfile.ZipFile(wheel("vllm", VLLM)) as archive:
        record = archive.read(f"vllm-{VLLM}.dist-info/RECORD").decode()
    quoted = [line for line in record.splitlines() if line.startswith('"')]
    assert len(quoted) == 519
    assert '"vllm/model_executor/layers/fused_moe/configs/E=1,N=14336,device_name=NVIDIA_A100-SXM4-80GB.json"' in record


def test_a_converged_real_vllm_venv_is_converged_in_one_round_trip(host: Path, sshd: SshServer) -> None:
    plan = _plan(host, LIGHT_PINS)
    first = _orch(host, "apply", plan)  # the first verification hashes every file once
    assert first.returncode == 0, first.stdout + first.stderr
    assert "changed" not in first.stdout.split("recap")[0], first.stdout
    facts = json.loads((last_run(host) / "hosts" / "h1" / "facts.json").read_text())
    assert facts["record_files"]["files"] > 13000

    mark = sshd.log_mark()
    check = _orch(host, "plan", plan, "--detailed-exitcode")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "missing" not in check.stdout and "RECORD" not in check.stdout
    assert sshd.round_trips(sshd.inventory(1), since=mark)["h1"] == 1

    again = _orch(host, "apply", plan)
    assert again.returncode == 0, again.stdout + again.stderr
    facts = json.loads((last_run(host) / "hosts" / "h1" / "facts.json").read_text())
    assert facts["record_files"]["hashed"] == 0  # the stat cache: nothing re-hashed


def test_a_patched_real_file_is_found_despite_the_cache_and_healed(host: Path) -> None:
    plan = _plan(host, LIGHT_PINS)
    assert _orch(host, "apply", plan).returncode == 0  # cached
    site = _site(host)
    server = site / API_SERVER
    config = next((site / "vllm/model_executor/layers/fused_moe/configs").glob("E=1,N=14336,*.json"))
    original = server.read_bytes()
    stat = server.stat()
    server.write_bytes(original.replace(b"import", b"imporT", 1))  # same size, a debug edit
    os.utime(server, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the old mtime
    config.write_text(config.read_text() + " ")

    check = _orch(host, "plan", plan, "--detailed-exitcode")
    assert check.returncode == 2, check.stdout + check.stderr
    assert API_SERVER in check.stdout and "E=1,N=14336" in check.stdout
    assert f"reinstall vllm=={VLLM} (2 files differ from RECORD)" in check.stdout

    apply = _orch(host, "apply", plan)  # offline: the reinstall takes no dependencies
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert server.read_bytes() == original
    assert _orch(host, "plan", plan, "--detailed-exitcode").returncode == 0


def test_the_real_flashinfer_family(host: Path) -> None:
    _uv(host, wheel("flashinfer-cubin", OLD_CUBIN))  # a leftover from a 0.16-era install
    unpinned = _orch(host, "plan", _plan(host, [f"vllm=={VLLM}"]))
    assert unpinned.returncode == 1, unpinned.stdout + unpinned.stderr
    assert (f"package family out of step: flashinfer-cubin {OLD_CUBIN}, flashinfer-python "
            f"{FLASHINFER}") in unpinned.stdout

    half = _plan(host, [f"vllm=={VLLM}", f"flashinfer-python=={FLASHINFER}"])
    check = _orch(host, "plan", half, "--detailed-exitcode")
    assert check.returncode == 2, check.stdout + check.stderr
    assert f"flashinfer-cubin {OLD_CUBIN} -> {FLASHINFER} (family)" in check.stdout
    assert f"pin flashinfer-cubin=={FLASHINFER} in install.packages" in check.stdout
    apply = _orch(host, "apply", half)
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert "out of step" not in apply.stdout.split("recap")[-1]
    assert _orch(host, "plan", _plan(host, LIGHT_PINS), "--detailed-exitcode").returncode == 0


def test_a_locked_apply_reinstalls_the_real_frozen_set_without_resolving(host: Path) -> None:
    plan = _plan(host, LIGHT_PINS)
    assert _orch(host, "apply", plan).returncode == 0
    frozen = last_run(host)
    # flashinfer-python drifts to 0.6.3: resolving its dependencies would fetch torch.
    _uv(host, wheel("flashinfer-python", OLD_FLASHINFER))
    check = _orch(host, "plan", "--locked", frozen, "--detailed-exitcode")
    assert check.returncode == 2, check.stdout + check.stderr
    assert f"flashinfer-python {OLD_FLASHINFER} -> {FLASHINFER}" in check.stdout
    locked = _orch(host, "apply", "--locked", frozen)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    freeze = (last_run(host) / "hosts" / "h1" / "freeze.txt").read_text()
    assert freeze == (frozen / "hosts" / "h1" / "freeze.txt").read_text()
    assert not re.search(r"^torch==", freeze, re.M)


def test_names_read_from_the_real_wheel_match_the_builtin_fallback(host: Path) -> None:
    transport = connect("here", Inventory(hosts={"here": HostSpec(connection="local")}))
    facts = probe(transport, ProbeRequest(venv=str(host / "venv"), engine_builds=BUILD_PATTERN))
    assert facts.engine_build is not None and facts.engine_build.version == VLLM
    assert facts.engine_build.reasoning_parsers == vllm_names.REASONING_PARSERS_0_17
    assert facts.engine_build.tool_parsers == vllm_names.TOOL_CALL_PARSERS_0_17
    assert facts.engine_build.attention_backends == vllm_names.ATTENTION_BACKENDS_0_17
    assert {"kimi_k2", "minimax_m2_append_think", "step3p5"} <= facts.engine_build.reasoning_parsers


def test_a_parser_name_the_real_vllm_lacks_blocks_the_launch(host: Path) -> None:
    plan = _plan(host, LIGHT_PINS)
    data = yaml.safe_load(plan.read_text())
    data["service"] = {"engine": "vllm", "model": "moonshotai/Kimi-K2.5", "backend": "process",
                       "args": {"reasoning-parser": "kimi", "tool-call-parser": "step3p5",
                                "enable-auto-tool-choice": True}}
    plan.write_text(yaml.safe_dump(data))
    check = _orch(host, "plan", plan, "--detailed-exitcode")
    assert check.returncode == 1, check.stdout + check.stderr
    said = " ".join(check.stdout.split())
    assert ("service.args.reasoning-parser 'kimi' is not a name the host's vLLM 0.17.1 knows; "
            "vLLM would die only after loading the weights") in said
    assert "did you mean 'kimi_k2'?" in said
    assert "tool-call-parser" not in said  # step3p5 is a real 0.17.1 tool parser
