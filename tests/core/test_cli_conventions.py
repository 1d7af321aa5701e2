"""The command line's conventions, through the real CLI: exit codes, usage errors, closed
pipes, --version, shell completion, help text for every option, retries said once."""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.cli import COMMANDS, build_parser
from orchestrator.exit_codes import MEANINGS, ExitCode
from orchestrator.selfwheel import self_wheel_digest
from tests.fixtures.orchcli import orch

ROOT = Path(__file__).resolve().parents[2]
SIM_PLAN = ROOT / "plans" / "sim" / "kimi-nvfp4.yaml"


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A pipeline run by bash, orch being this interpreter's CLI; `pipefail` so the exit
    code is orch's own, not head's."""
    orch_cmd = f"{sys.executable} -m orchestrator.cli"
    return subprocess.run(["bash", "-c", "set -o pipefail; " + command.replace("orch ", orch_cmd + " ", 1)],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_docs_print_the_one_exit_code_table() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", doc, re.MULTILINE))
    assert {int(code): meaning for code, meaning in rows.items()} == \
        {int(code): meaning for code, meaning in MEANINGS.items()}
    assert set(MEANINGS) == set(ExitCode)


def test_help_prints_the_exit_codes(tmp_path: Path) -> None:
    result = orch("--help", cwd=tmp_path)
    assert result.returncode == 0
    for code in ExitCode:
        assert re.search(rf"^\s+{int(code)}\s", result.stdout, re.MULTILINE), code


@pytest.mark.parametrize("argv, command", [
    (["apply", "--bogus"], "orch apply"),
    (["plan", str(SIM_PLAN), str(SIM_PLAN)], "orch plan"),
    (["bench"], "orch bench"),  # --url is required
    (["apply", str(SIM_PLAN), "--skip", "everything"], "orch apply"),
    (["runs", "--last", "many"], "orch runs"),
    (["apply"], "orch apply"),  # neither a plan nor --locked
    (["no-such-command"], "orch"),
    ([], "orch"),
])
def test_usage_errors_exit_64_with_the_commands_own_usage(
    tmp_path: Path, argv: list[str], command: str
) -> None:
    result = orch(*argv, cwd=tmp_path)
    assert result.returncode == ExitCode.USAGE == 64, result.stderr
    usage = result.stderr if argv else result.stdout
    assert usage.startswith(f"usage: {command} "), usage
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_plan_is_0_when_it_succeeds_and_detailed_exitcode_says_pending(tmp_path: Path) -> None:
    """Terraform's convention: `set -e` scripts go on after a plan with changes pending;
    --detailed-exitcode (as `orch diff --exit-code`) makes pending changes exit 2."""
    plan = tmp_path / "files.yaml"
    target = tmp_path / "a.conf"
    plan.write_text(yaml.safe_dump({"name": "files", "hosts": "localhost",
                                    "files": [{"path": str(target), "content": "x\n"}]}))
    pending = orch("plan", plan, cwd=tmp_path)
    assert pending.returncode == ExitCode.OK, pending.stderr
    assert "a.conf" in pending.stdout  # the pending change is shown all the same
    assert orch("plan", plan, "--detailed-exitcode", cwd=tmp_path).returncode == ExitCode.CHANGES
    assert orch("apply", plan, cwd=tmp_path).returncode == ExitCode.OK
    assert orch("plan", plan, cwd=tmp_path).returncode == ExitCode.OK
    assert orch("plan", plan, "--detailed-exitcode", cwd=tmp_path).returncode == ExitCode.OK
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nhosts: localhost\nfiles: [{path: relative, content: x}]\n")
    assert orch("plan", broken, "--detailed-exitcode", cwd=tmp_path).returncode == ExitCode.ERROR


@pytest.mark.slow
def test_diff_exit_code_says_whether_the_plans_differ(tmp_path: Path) -> None:
    other = ROOT / "plans" / "sim" / "minimax-m2.5.yaml"
    assert orch("diff", SIM_PLAN, SIM_PLAN, "--exit-code", cwd=tmp_path).returncode == ExitCode.OK
    assert orch("diff", SIM_PLAN, other, "--exit-code", cwd=tmp_path).returncode == ExitCode.CHANGES
    assert orch("diff", SIM_PLAN, other, cwd=tmp_path).returncode == ExitCode.OK
    missing = orch("diff", SIM_PLAN, tmp_path / "nope.yaml", "--exit-code", cwd=tmp_path)
    assert missing.returncode == ExitCode.ERROR  # an error is never mistaken for "differ"


@pytest.mark.slow
def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    # Enough output that the reader is gone before orch is done writing.
    plan = tmp_path / "files.yaml"
    files = [{"path": str(tmp_path / f"f{i}.conf"), "content": f"{i}\n"} for i in range(400)]
    plan.write_text(yaml.safe_dump({"name": "files", "hosts": "localhost", "files": files}))
    result = _shell(f"orch plan {plan} --detailed-exitcode | head -1", tmp_path)
    assert result.stdout.startswith("plan (check mode) files on localhost")
    assert result.returncode == ExitCode.CHANGES, result.stderr  # its own code, not 1 or 141
    assert result.stderr == ""
    listing = _shell("orch schema | head -c 10", tmp_path)
    assert listing.returncode == 0 and listing.stderr == ""


@pytest.mark.slow
def test_apply_goes_on_when_its_reader_leaves(tmp_path: Path) -> None:
    plan = tmp_path / "files.yaml"
    files = [{"path": str(tmp_path / f"f{i}.conf"), "content": f"{i}\n"} for i in range(200)]
    plan.write_text(yaml.safe_dump({"name": "files", "hosts": "localhost", "files": files}))
    result = _shell(f"orch apply {plan} | head -1", tmp_path)
    assert result.returncode == 0, result.stderr
    assert all((tmp_path / f"f{i}.conf").exists() for i in range(200))  # converged anyway


def test_version_names_the_build(tmp_path: Path) -> None:
    result = orch("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"orch 0.1.0 (build {self_wheel_digest()[:12]})\n"


def _all_options() -> list[tuple[str, argparse.Action]]:
    parser = build_parser("*")
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = [("orch", a) for a in parser._actions]
    for name, sub in subs.choices.items():
        found += [(f"orch {name}", a) for a in sub._actions]
        for nested in sub._actions:  # orch sim serve
            if isinstance(nested, argparse._SubParsersAction):
                for inner_name, inner in nested.choices.items():
                    found += [(f"orch {name} {inner_name}", a) for a in inner._actions]
    return found


def test_every_option_and_argument_has_help() -> None:
    missing = [f"{where} {action.option_strings or action.dest}" for where, action in _all_options()
               if not isinstance(action, argparse._SubParsersAction) and not action.help]
    assert missing == []


def test_options_with_choices_name_them_in_help() -> None:
    hidden = [f"{where} {action.option_strings}" for where, action in _all_options()
              if action.choices and action.metavar and not isinstance(
                  action, argparse._SubParsersAction)
              and not all(str(c) in (action.help or "") for c in action.choices)]
    assert hidden == []


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_know_every_command_and_load_in_their_shell(
    tmp_path: Path, shell: str
) -> None:
    result = orch("completion", shell, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    script = result.stdout
    for name in COMMANDS:
        assert name in script
    assert "--skip" in script and "--concurrency" in script
    if shell == "bash":
        path = tmp_path / "orch.bash"
        path.write_text(script)
        # Load it and ask bash to complete `orch ap`: the real completion function runs.
        probe = subprocess.run(["bash", "-c", f"""
            source {path}
            COMP_WORDS=(orch ap); COMP_CWORD=1; COMP_LINE='orch ap'; COMP_POINT=7
            $(complete -p orch | sed -E 's/.*-F ([^ ]+).*/\\1/') orch ap orch
            printf '%s\\n' "${{COMPREPLY[@]}}"
        """], capture_output=True, text=True, timeout=30)
        assert probe.returncode == 0, probe.stderr
        assert "apply" in probe.stdout.split()


@pytest.mark.slow
def test_a_retried_connection_is_reported_once_per_retry(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nobody listens on: refused, transient, retried
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({
        "hosts": {"gone": {"address": "127.0.0.1", "port": port, "connect_timeout": 2}},
        "ssh": {"known_hosts": False, "config": False, "connect_retries": 2},
    }))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "p", "hosts": "gone",
                                    "files": [{"path": "/tmp/x", "content": "x"}]}))
    result = orch("plan", plan, "-i", inventory, cwd=tmp_path)
    assert result.returncode == ExitCode.ERROR
    both = result.stdout + result.stderr
    assert both.count("retry 1:") == 1 and both.count("retry 2:") == 1, both
    assert "attempt 1 failed" not in both and "WARNING" not in both
