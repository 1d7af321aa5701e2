"""Rendered systemd units: golden files, ExecStart quoting, and `systemd-analyze verify`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures.service_plans import load_plan, make_plan
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import PlanError
from orchestrator.service.launch import LaunchSpec, render_env_file, render_launch
from orchestrator.service.systemd import (
    exec_line,
    quote_exec_arg,
    render_unit,
    unquote_exec_line,
)

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ORCH_UPDATE_GOLDEN") == "1"
CASES = {
    "kimi-nvfp4": "/opt/orch/kimi-nvfp4/bin",
    "sim": "/opt/orch/sim/bin",
}


def unit_for(plan_name: str, venv_bin: str, root: str = "") -> str:
    spec = render_launch(load_plan(plan_name), venv_bin=venv_bin)
    return render_unit(
        spec,
        name="orch-vllm",
        env_file=f"{root}/etc/orch/orch-vllm.env",
        log_path=f"{root}/var/log/orch/orch-vllm.log",
    )


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; ORCH_UPDATE_GOLDEN=1 rewrites it"


@pytest.mark.parametrize("plan_name", sorted(CASES))
def test_unit_matches_golden_file(plan_name: str) -> None:
    check_golden(f"{plan_name}.service", unit_for(plan_name, CASES[plan_name]))


def test_env_file_matches_golden_file() -> None:
    spec = render_launch(load_plan("kimi-nvfp4"), venv_bin=CASES["kimi-nvfp4"])
    text = render_env_file(spec, {"HF_TOKEN": "hf_placeholder", "ORCH_API_KEY": "sk-placeholder"})
    check_golden("kimi-nvfp4.env", text)


def test_unit_holds_no_secret_and_no_environment_line() -> None:
    text = unit_for("kimi-nvfp4", CASES["kimi-nvfp4"])
    assert "${env:" not in text and "ORCH_API_KEY" not in text and "HF_TOKEN" not in text
    assert "Environment=" not in text.replace("EnvironmentFile=", "")
    assert "Restart=no\n" in text and "KillSignal=SIGINT\n" in text


def test_without_a_log_path_output_goes_to_the_journal() -> None:
    spec = render_launch(make_plan({}), venv_bin="/v/bin")
    text = render_unit(spec, name="orch-vllm", env_file="/e", log_path=None)
    assert "StandardOutput=journal\n" in text


@pytest.mark.parametrize(
    ("name", "env_file", "venv_bin", "match"),
    [
        ("bad name!", "/e", "/v/bin", "not a valid systemd unit name"),
        ("ok", "relative.env", "/v/bin", "absolute path for env_file"),
        ("ok", "/e", "~/venv/bin", "absolute path for the executable"),
    ],
)
def test_bad_unit_inputs_are_plan_errors(name: str, env_file: str, venv_bin: str, match: str) -> None:
    spec = render_launch(make_plan({}), venv_bin=venv_bin)
    with pytest.raises(PlanError, match=match):
        render_unit(spec, name=name, env_file=env_file, log_path=None)


@pytest.mark.parametrize(
    ("arg", "quoted"),
    [
        ("--port", "--port"),
        ("/opt/v/bin/vllm", "/opt/v/bin/vllm"),
        ("a b", '"a b"'),
        ("", '""'),
        ('{"cudagraph_mode":"PIECEWISE"}', '"{\\"cudagraph_mode\\":\\"PIECEWISE\\"}"'),
        ("100%", "100%%"),
        ("$HOME", '"$$HOME"'),
        ("back\\slash", '"back\\\\slash"'),
        (";", '";"'),
        ("it's", "\"it's\""),
        ("tab\there", '"tab\\there"'),
    ],
)
def test_exec_arg_quoting(arg: str, quoted: str) -> None:
    assert quote_exec_arg(arg) == quoted


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\0",
                                               blacklist_categories=["Cs"])), min_size=1))
def test_exec_line_round_trips(argv: list[str]) -> None:
    assert unquote_exec_line(exec_line(argv)) == argv


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_venv(root: Path) -> str:
    """A venv bin directory with executables, because verify checks that ExecStart exists."""
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("vllm", "orch"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("plan_name", sorted(CASES))
def test_systemd_analyze_verify_accepts_the_unit(plan_name: str, tmp_path: Path) -> None:
    text = unit_for(plan_name, fake_venv(tmp_path), root=str(tmp_path))
    # Same unit as the golden file apart from the paths.
    golden = (GOLDEN / f"{plan_name}.service").read_text()
    venv_root = CASES[plan_name].removesuffix("/bin")
    assert text.replace(str(tmp_path / "venv"), venv_root).replace(str(tmp_path), "") == golden
    unit = tmp_path / "orch-vllm.service"
    unit.write_text(text)
    result = verify(unit)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_systemd_accepts_awkward_arguments_without_warnings(tmp_path: Path) -> None:
    awkward = ["a b", "100%", "$HOME", "${X}", 'q"uote', "back\\slash", ";", "tab\tx", "", "é"]
    spec = LaunchSpec(
        engine="vllm", model="m%1", argv=[f"{fake_venv(tmp_path)}/vllm", "serve", *awkward],
        env={}, secret_env_names=frozenset(), workdir=str(tmp_path), host="h", port=1,
    )  # fmt: skip
    unit = tmp_path / "orch-vllm.service"
    unit.write_text(render_unit(spec, name="orch-vllm", env_file="/e", log_path=None))
    result = verify(unit)
    assert result.returncode == 0 and result.stderr == "", result.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_verify_does_catch_a_broken_unit(tmp_path: Path) -> None:
    # The check above can fail: an unknown escape is reported.
    unit = tmp_path / "orch-vllm.service"
    text = unit_for("sim", fake_venv(tmp_path), root=str(tmp_path))
    unit.write_text(text.replace("ExecStart=", "Bogus=1\nExecStart=", 1))
    assert "Unknown key" in verify(unit).stderr
