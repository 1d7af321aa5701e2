"""`orch init` through the real CLI: flags, defaults, hostile values, no overwrite, and the
questions answered on a real pseudo-terminal (the pure rendering: test_init_documents.py)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from fixtures import zygote

from orchestrator.inventory import load_inventory
from orchestrator.plan.loader import load_plan
from tests.fixtures.orchcli import orch
from tests.fixtures.terminal import PseudoTerminal

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def init(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`orch init` with stdin not a terminal: it must never ask."""
    return zygote.run(["init", *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL, timeout=60,
                      env={**os.environ, "COLUMNS": "120"})


def _left_behind(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_no_flags_and_no_terminal_make_a_simulator_plan_for_this_machine(tmp_path: Path) -> None:
    result = init(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plan_file = tmp_path / "plans" / "sim-kimi-k2.5-nvfp4.yaml"
    inventory_file = tmp_path / "inventory" / "sim-kimi-k2.5-nvfp4.yaml"
    assert _left_behind(tmp_path) == ["inventory", "inventory/sim-kimi-k2.5-nvfp4.yaml",
                                      "plans", "plans/sim-kimi-k2.5-nvfp4.yaml"]
    assert ("orch plan plans/sim-kimi-k2.5-nvfp4.yaml -i inventory/sim-kimi-k2.5-nvfp4.yaml"
            in result.stdout)
    assert "orch apply plans/sim-kimi-k2.5-nvfp4.yaml" in result.stdout

    plan = load_plan(plan_file).plan
    assert plan.hosts == "localhost"
    assert plan.service is not None and plan.service.engine == "sim"
    assert plan.service.backend == "process" and plan.service.host == "127.0.0.1"
    assert plan.service.sim.time_scale == 0.1
    assert plan.python is not None  # the user's own folder, not a shared /tmp one
    assert plan.python.venv == f"{Path.home()}/.cache/orch/sim/venv-0.17.1"
    assert plan.install.packages == [] and "HF_TOKEN" not in plan.env
    assert [check.name for check in plan.smoke] == ["answer", "code"]
    inventory = load_inventory(inventory_file)
    assert inventory.hosts["localhost"].connection == "local"
    assert oct(plan_file.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode

    # End to end in check mode: the plan runs against this machine as written.
    checked = orch("plan", plan_file, "-i", inventory_file, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Traceback" not in checked.stderr


def test_flags_for_an_ssh_host_make_a_vllm_plan(tmp_path: Path) -> None:
    result = init("qwen", "--host", "ubuntu@10.0.0.5:2222", "--identity-file", "~/.ssh/id_ed25519",
                  "--jump", "ops@bastion.example.com", "--model", "Qwen/Qwen3-8B", "--tp", "2",
                  "--served-model-name", "qwen3", "--dir", "deploy", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plan_file = tmp_path / "deploy" / "plans" / "qwen.yaml"
    loaded = load_plan(plan_file)
    plan = loaded.plan
    assert plan.hosts == "10.0.0.5"
    assert plan.install.packages == ["vllm==0.17.1"]
    assert plan.python is not None and plan.python.installer == "uv"
    assert plan.python.venv == "/opt/venvs/vllm-0.17.1"
    assert plan.service is not None and plan.service.engine == "vllm"
    assert plan.service.model == "Qwen/Qwen3-8B" and plan.service.served_model_name == "qwen3"
    assert plan.service.args == {"tensor-parallel-size": 2}
    assert plan.health.startup_timeout == 1800.0
    assert plan.bench is not None and plan.bench.mode == "batch" and plan.bench.concurrency[-1] == 128
    text = plan_file.read_text()
    assert "  # HF_TOKEN: ${env:HF_TOKEN}" in text  # a gated model's token, one line away
    assert "docs/plan-reference.md" in text
    host = load_inventory(tmp_path / "deploy" / "inventory" / "qwen.yaml").hosts["10.0.0.5"]
    assert (host.address, host.user, host.port) == ("10.0.0.5", "ubuntu", 2222)
    assert (host.identity_file, host.jump) == ("~/.ssh/id_ed25519", "ops@bastion.example.com")
    assert "deploy/plans/qwen.yaml -i deploy/inventory/qwen.yaml" in result.stdout
    validated = orch("validate", plan_file, cwd=tmp_path)  # the launch command compiles too
    assert validated.returncode == 0, validated.stderr


def test_vllm_without_a_terminal_needs_the_model_flag(tmp_path: Path) -> None:
    result = init("--host", "gpu1", cwd=tmp_path)
    assert result.returncode == 64
    assert result.stderr.startswith("usage: orch init ")
    assert "--model: required" in result.stderr and "--sim" in result.stderr
    assert _left_behind(tmp_path) == []


BASE = ("x", "--host", "gpu1", "--model", "org/model")


@pytest.mark.parametrize("hostile, flag", [
    (["--host", "gpu1; rm -rf /"], "--host"),
    (["--host", "gpu1\nhosts: evil"], "--host"),
    (["--host", "u@gpu1:99999"], "--host"),
    (["--port", "70000"], "--port"),  # caught by the inventory loader, blamed on --port
    (["--user", "root$(id)"], "--user"),
    (["--host", "bob@gpu1", "--user", "alice"], "--user"),
    (["--jump", "a;b"], "--jump"),
    (["--jump", "bastion"], "--jump"),  # a bare name that is no host of the inventory
    (["--model", "org/model\nservice: {model: evil}"], "--model"),
    (["--model", "${env:HOME}"], "--model"),
    (["--served-model-name=--api-key=x"], "--served-model-name"),
    (["--identity-file", "~/.ssh/key\r"], "--identity-file"),
    (["--vllm-version", "0.17.1; rm -rf /"], "--vllm-version"),  # the venv path's loader check
    (["--vllm-version", "0.17.1\n  - evil==1"], "--vllm-version"),
    (["--tensor-parallel-size", "0"], "--tensor-parallel-size"),
    (["../../escape"], "NAME"),
])
def test_a_bad_value_is_refused_naming_its_flag_and_leaves_nothing(
    tmp_path: Path, hostile: list[str], flag: str
) -> None:
    args = [*hostile, *BASE[1:]] if flag == "NAME" else [*BASE, *hostile]  # the last flag wins
    result = init(*args, "--dir", "out", cwd=tmp_path)
    assert result.returncode == 64, result.stdout + result.stderr
    assert re.search(rf"error: (argument )?{re.escape(flag)}\b", result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    assert _left_behind(tmp_path) == []  # not even the --dir it would have created


def test_hostile_values_that_are_only_text_end_up_quoted_and_inert(tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    model = f"$(touch {pwned}); rm -rf ~ `id` \"q\" 'it''s' \\ #x {{a: [b]}}"
    key = "~/.ssh/my key; rm -rf /"
    result = init("inert", "--sim", "--model", model, "--served-model-name", "a: b # c",
                  "--identity-file", key, "--host", "gpu1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plan_file = tmp_path / "plans" / "inert.yaml"
    text = plan_file.read_text()
    model_line = next(line for line in text.splitlines() if line.startswith("  model: "))
    assert model_line.startswith('  model: "')  # quoted by the serializer
    plan = load_plan(plan_file).plan
    assert plan.service is not None
    assert plan.service.model == model and plan.service.served_model_name == "a: b # c"
    inventory = load_inventory(tmp_path / "inventory" / "inert.yaml")
    assert inventory.hosts["gpu1"].identity_file == key
    assert orch("validate", plan_file, cwd=tmp_path).returncode == 0
    assert not pwned.exists()


def test_existing_files_are_kept_without_force(tmp_path: Path) -> None:
    assert init("mine", "--sim", cwd=tmp_path).returncode == 0
    plan_file = tmp_path / "plans" / "mine.yaml"
    plan_file.write_text("# my edits\n")
    again = init("mine", "--sim", cwd=tmp_path)
    assert again.returncode == 1
    assert "plans/mine.yaml and inventory/mine.yaml already exist" in again.stderr
    assert "--force" in again.stderr
    assert plan_file.read_text() == "# my edits\n"
    (tmp_path / "inventory" / "mine.yaml").unlink()
    one = init("mine", "--sim", cwd=tmp_path)
    assert one.returncode == 1 and "plans/mine.yaml already exists" in one.stderr
    assert not (tmp_path / "inventory" / "mine.yaml").exists()  # all or nothing
    forced = init("mine", "--sim", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "overwrote plans/mine.yaml" in forced.stdout
    assert load_plan(plan_file).plan.name == "mine"
    assert [p.name for p in (tmp_path / "plans").iterdir()] == ["mine.yaml"]  # no temporary


# --- questions on a terminal ------------------------------------------------------------------

def Terminal(*args: str, cwd: Path) -> PseudoTerminal:
    return PseudoTerminal(["init", *args], cwd=cwd)


def test_questions_on_a_terminal_for_a_gpu_host(tmp_path: Path) -> None:
    term = Terminal("--dir", str(tmp_path), cwd=tmp_path)
    term.expect("Host")
    term.answer("gpu1; rm -rf /")  # refused, asked again
    term.expect("is not a host name or address")
    term.expect("Host")
    term.answer("ubuntu@10.0.0.7:2200")
    term.expect("Engine")
    term.answer("")  # the default for a remote host: vllm
    term.expect("Model")
    term.answer("Qwen/Qwen3-8B")
    term.expect("GPUs")
    term.answer("none")
    term.expect("expected a number of GPUs")
    term.expect("GPUs")
    term.answer("4")
    assert term.finish() == 0, term.output
    assert "wrote" in term.output and "orch apply" in term.output
    plan = load_plan(tmp_path / "plans" / "qwen3-8b.yaml").plan
    assert plan.service is not None and plan.service.engine == "vllm"
    assert plan.service.model == "Qwen/Qwen3-8B"
    assert plan.service.args == {"tensor-parallel-size": 4}
    host = load_inventory(tmp_path / "inventory" / "qwen3-8b.yaml").hosts["10.0.0.7"]
    assert (host.user, host.port) == ("ubuntu", 2200)


def test_defaults_on_a_terminal_and_flags_skip_their_questions(tmp_path: Path) -> None:
    term = Terminal("mine", "--host", "localhost", "--tp", "1", cwd=tmp_path)
    term.expect("Engine")  # no Host question: --host was given
    term.answer("")  # the default on this machine: the simulator
    term.expect("Model")
    term.answer("")  # and its model
    assert term.finish() == 0, term.output
    assert "GPUs" not in term.output and "Host" not in term.output
    plan = load_plan(tmp_path / "plans" / "mine.yaml").plan
    assert plan.service is not None and plan.service.engine == "sim"
    assert plan.service.model == "nvidia/Kimi-K2.5-NVFP4"

    quiet = Terminal("other", "--yes", cwd=tmp_path)  # a terminal, but --yes: nothing asked
    assert quiet.finish() == 0, quiet.output
    assert "Engine" not in quiet.output
    assert (tmp_path / "plans" / "other.yaml").exists()
