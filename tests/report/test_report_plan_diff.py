"""Plan diffs across the shipped pivots, and their properties."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from orchestrator import masking
from orchestrator.plan.loader import load_plan
from orchestrator.plan.models import Plan
from orchestrator.report.plan_diff import Change, diff_plans, diff_table, weight_format
from orchestrator.tables import to_html, to_rich

REPO = Path(__file__).resolve().parents[2]


def shipped(name: str) -> Plan:
    return load_plan(REPO / "plans" / name).plan


def by_setting(changes: list[Change]) -> dict[str, Change]:
    return {c.setting: c for c in changes}


def test_kimi_nvfp4_to_minimax_names_every_kind_of_change() -> None:
    changes = by_setting(diff_plans(shipped("kimi-nvfp4.yaml"), shipped("minimax-m2.5.yaml")))
    expected = {
        "model.repo": ("model", "nvidia/Kimi-K2.5-NVFP4", "MiniMaxAI/MiniMax-M2.5"),
        "model.revision": ("model", "0fd0a5e6879298d3476e3b61852a79792a35ae3d", "f710177d938eff80b684d42c5aa84b382612f21f"),
        "service.model": ("model", "/models/kimi-k2.5-nvfp4", "/models/minimax-m2.5"),
        "weights (from the model name)": ("quantization", "NVFP4", "not named (the checkpoint's own)"),
        "--kv-cache-dtype": ("quantization", "fp8", None),
        "--tensor-parallel-size": ("parallelism", "8", "4"),
        "--enable-expert-parallel": ("parallelism", None, "true"),
        "CUDA_VISIBLE_DEVICES": ("parallelism", None, "0,1,2,3"),
        "GPUs used": ("parallelism", "8 (plan: TP 8)", "4 (plan: TP 4)"),
        "service.sim.profile": ("engine", "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "minimax-m2.5-4x-ep"),
        "VLLM_USE_FLASHINFER_MOE_FP4": ("env", "1", None),
        "--reasoning-parser": ("flags", "kimi_k2", "minimax_m2"),
        "--attention-backend": ("flags", "TRITON_MLA", None),
        "bench.concurrency": ("bench", "[1, 2, 4, 8, 16, 32, 48, 64, 96, 128]", "[1, 2, 4, 8, 16, 32, 64, 128, 256]"),
    }
    for setting, (category, before, after) in expected.items():
        assert changes[setting] == Change(category, setting, before, after), setting
    # same pins, same venv, same smoke checks: not a change
    assert "vllm" not in changes and "python.venv" not in changes and "smoke" not in changes


def test_changes_come_in_category_order() -> None:
    changes = diff_plans(shipped("kimi-nvfp4.yaml"), shipped("minimax-m2.5.yaml"))
    order = ["model", "quantization", "parallelism", "engine", "pins", "env", "flags", "bench", "other"]
    seen = [order.index(c.category) for c in changes]
    assert seen == sorted(seen)


def test_simulator_plan_against_the_real_one() -> None:
    changes = by_setting(diff_plans(shipped("kimi-nvfp4.yaml"), shipped("sim/kimi-nvfp4.yaml")))
    assert changes["service.engine"] == Change("engine", "service.engine", "vllm", "sim")
    assert changes["vllm"] == Change("pins", "vllm", "0.17.1", None)
    assert changes["flashinfer-cubin"] == Change("pins", "flashinfer-cubin", "0.6.4", None)
    # the simulator fetches no weights: the model section goes, the token with it
    assert changes["model.token"] == Change("model", "model.token", "${env:HF_TOKEN}", None)
    assert changes["service.model"] == Change("model", "service.model", "/models/kimi-k2.5-nvfp4", "nvidia/Kimi-K2.5-NVFP4")


def test_a_plan_against_itself_has_no_changes() -> None:
    plan = shipped("kimi-int4.yaml")
    assert diff_plans(plan, plan) == []
    table = diff_table(plan, plan, [])
    assert table.rows == [["", "no differences", "", ""]]


def test_pin_upgrade_is_one_pin_change() -> None:
    base = shipped("kimi-nvfp4.yaml")
    upgraded = load_plan(REPO / "plans/kimi-nvfp4.yaml", sets=["vars.vllm_version=0.18.0"]).plan
    pins = [c for c in diff_plans(base, upgraded) if c.category == "pins"]
    assert pins == [Change("pins", "vllm", "0.17.1", "0.18.0")]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("nvidia/Kimi-K2.5-NVFP4", "NVFP4"),
        ("moonshotai/Kimi-K2.5", None),
        ("Qwen/Qwen3-235B-A22B-FP8", "FP8"),
        ("TheBloke/Llama-2-7B-AWQ", "AWQ"),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "W4A16"),
        ("openai/gpt-oss-120b", None),
    ],
)
def test_weight_format_from_model_name(model: str, expected: str | None) -> None:
    assert weight_format(model) == expected


def test_rendered_diff_masks_secret_values() -> None:
    secret = "hf_s3cr3t_value_123"
    masking.register(secret)
    a = Plan.model_validate({"name": "a", "env": {"TOKEN": secret}})
    b = Plan.model_validate({"name": "b", "env": {"TOKEN": "${env:TOKEN}"}})
    table = diff_table(a, b, diff_plans(a, b))
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(to_rich(table))
    for rendered in (out.getvalue(), to_html(table)):
        assert secret not in rendered
        assert "***" in rendered


ARG_VALUES = st.one_of(st.integers(1, 16), st.booleans(), st.sampled_from(["fp8", "auto", "TRITON_MLA"]))
ARGS = st.dictionaries(st.sampled_from(["tensor-parallel-size", "kv-cache-dtype", "max-num-seqs", "enforce-eager"]), ARG_VALUES)
ENV = st.dictionaries(st.sampled_from(["A", "B", "CUDA_VISIBLE_DEVICES"]), st.sampled_from(["0", "0,1", "x"]))


def _plan(name: str, args: dict[str, Any], env: dict[str, str]) -> Plan:
    return Plan.model_validate({"name": name, "env": env, "service": {"model": "m", "args": args}})


@settings(max_examples=60, deadline=None)
@given(ARGS, ENV, ARGS, ENV)
def test_diff_is_symmetric_and_empty_only_for_equal_plans(
    args_a: dict[str, Any], env_a: dict[str, str], args_b: dict[str, Any], env_b: dict[str, str]
) -> None:
    a, b = _plan("a", args_a, env_a), _plan("b", args_b, env_b)
    forward = {(c.category, c.setting): (c.before, c.after) for c in diff_plans(a, b)}
    backward = {(c.category, c.setting): (c.after, c.before) for c in diff_plans(b, a)}
    assert forward == backward
    same = json.dumps([args_a, env_a], sort_keys=True) == json.dumps([args_b, env_b], sort_keys=True)
    assert (not forward) == same


def sglang(args: dict[str, Any]) -> Plan:
    return Plan.model_validate({"name": "s", "service": {"engine": "sglang", "model": "m", "args": args}})


def test_an_sglang_plans_flags_are_grouped_by_its_own_names() -> None:
    """`tp-size` is SGLang's parallelism and `kv-cache-dtype` its quantization; before, only
    vLLM's names were grouped and SGLang's sizes fell under `flags`, its GPUs counted as 1."""
    a = sglang({"tp-size": 8, "kv-cache-dtype": "auto", "max-running-requests": 64})
    b = sglang({"tp-size": 4, "dp-size": 2, "kv-cache-dtype": "fp8_e4m3", "max-running-requests": 128})
    changes = by_setting(diff_plans(a, b))
    assert changes["--tp-size"].category == "parallelism"
    assert changes["--dp-size"].category == "parallelism"
    assert changes["--kv-cache-dtype"].category == "quantization"
    assert changes["--max-running-requests"].category == "flags"
    assert "GPUs used" not in changes  # 8 and 4 x 2
    spelled = by_setting(diff_plans(a, sglang({"tensor-parallel-size": 8})))  # its alias of tp-size
    assert spelled["--tensor-parallel-size"].category == "parallelism"
    wider = by_setting(diff_plans(a, sglang({"tp-size": 8, "dp-size": 2})))
    assert wider["GPUs used"] == Change("parallelism", "GPUs used", "8 (plan: TP 8)", "16 (plan: TP 8 x DP 2)")
