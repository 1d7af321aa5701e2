"""The shipped plans and inventories: every one validates and says what it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.inventory import load_inventory
from orchestrator.plan.loader import load_plan
from orchestrator.plan.models import parse_pin
from orchestrator.plan.secrets import secret_names

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "plans").rglob("*.yaml"))
REAL = ["kimi-nvfp4", "kimi-int4", "minimax-m2.5"]


def test_the_plans_are_there() -> None:
    names = {str(p.relative_to(ROOT / "plans")) for p in PLANS}
    assert {
        "base/vllm.yaml",
        *(f"{n}.yaml" for n in REAL),
        *(f"sim/{n}.yaml" for n in REAL),
    } <= names


@pytest.mark.parametrize("path", PLANS, ids=[str(p.relative_to(ROOT)) for p in PLANS])
def test_every_shipped_plan_validates(path: Path) -> None:
    loaded = load_plan(path)
    assert loaded.plan.name
    for pin in loaded.plan.install.packages:
        parse_pin(pin)


def _load(name: str) -> dict[str, object]:
    plan = load_plan(ROOT / "plans" / f"{name}.yaml").plan
    return plan.model_dump()


def test_kimi_nvfp4_is_the_real_deployment() -> None:
    plan = load_plan(ROOT / "plans" / "kimi-nvfp4.yaml").plan
    assert plan.hosts == "blackwell"
    assert plan.install.packages == [
        "vllm==0.17.1",
        "flashinfer-python==0.6.4",
        "flashinfer-cubin==0.6.4",
    ]
    assert plan.python is not None
    assert (plan.python.venv, plan.python.installer) == ("/opt/venvs/vllm-0.17.1", "uv")
    assert plan.service is not None
    # The weights: a pinned commit, fetched into a folder the server is given.
    assert plan.model is not None and plan.model.repo == "nvidia/Kimi-K2.5-NVFP4"
    assert plan.model.pinned and plan.model.token == "${env:HF_TOKEN}"
    assert (plan.service.engine, plan.service.model) == ("vllm", plan.model.dir)
    assert plan.env["HF_HUB_OFFLINE"] == "1"  # the server loads what orch fetched
    args = plan.service.args
    assert args["tensor-parallel-size"] == 8
    assert args["kv-cache-dtype"] == "fp8"
    assert args["attention-backend"] == "TRITON_MLA"
    assert args["reasoning-parser"] == args["tool-call-parser"] == "kimi_k2"
    assert args["enable-auto-tool-choice"] is True and args["trust-remote-code"] is True
    assert plan.env["VLLM_USE_FLASHINFER_MOE_FP4"] == "1"
    assert "NCCL_P2P_LEVEL" in plan.env
    assert secret_names(plan) == ["HF_TOKEN"]
    assert [s.name for s in plan.smoke] == ["reasoning", "code"]
    assert plan.bench is not None and plan.bench.max_tokens == 1024
    assert plan.bench.mode == "batch" and plan.bench.requests_for(128) == 128
    assert plan.bench.concurrency == [1, 2, 4, 8, 16, 32, 48, 64, 96, 128]


def test_kimi_int4_and_minimax() -> None:
    int4 = load_plan(ROOT / "plans" / "kimi-int4.yaml").plan
    assert int4.model is not None and int4.model.repo == "moonshotai/Kimi-K2.5"
    assert int4.model.pinned and int4.service is not None
    assert int4.service.model == int4.model.dir
    assert int4.service.args["tensor-parallel-size"] == 8
    assert "VLLM_USE_FLASHINFER_MOE_FP4" not in int4.env
    minimax = load_plan(ROOT / "plans" / "minimax-m2.5.yaml").plan
    assert minimax.model is not None and minimax.model.repo == "MiniMaxAI/MiniMax-M2.5"
    assert minimax.model.pinned and minimax.service is not None
    args = minimax.service.args
    assert (args["tensor-parallel-size"], args["enable-expert-parallel"]) == (4, True)
    assert args["reasoning-parser"] == args["tool-call-parser"] == "minimax_m2"
    assert minimax.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


@pytest.mark.parametrize("name", REAL)
def test_sim_plans_swap_in_the_simulator(name: str) -> None:
    from orchestrator.sim.profiles import PROFILES

    real = load_plan(ROOT / "plans" / f"{name}.yaml").plan
    loaded = load_plan(ROOT / "plans" / "sim" / f"{name}.yaml")
    sim = loaded.plan
    assert [Path(layer).name for layer in loaded.layers] == [
        "vllm.yaml",
        f"{name}.yaml",
        f"{name}.yaml",
    ]
    assert sim.hosts == "localhost"
    assert sim.service is not None and real.service is not None
    assert sim.service.engine == "sim"
    assert real.model is not None and sim.model is None  # the simulator needs no weights
    assert sim.service.model == real.model.repo
    assert sim.service.sim.profile in PROFILES
    assert sim.service.sim.profile == real.service.sim.profile
    # 0.1 for most; MiniMax's 4,000 tok/s at 0.25 (at 0.1 this machine's client is the limit)
    assert 0 < sim.service.sim.time_scale <= 0.25
    assert sim.install.packages == []
    # the user's own cache, never a folder other users may write (/tmp/orch-sim: issue 38)
    assert sim.python is not None and sim.python.venv.startswith(f"{Path.home()}/.cache/orch/sim/")
    assert "HF_TOKEN" not in sim.env and secret_names(sim) == []
    assert sim.bench is not None and sim.bench.requests_per_level == "1x"
    assert loaded.origins["service.model"].startswith(f"plans/sim/{name}.yaml:")


def test_inventories_load() -> None:
    local = load_inventory(ROOT / "inventory" / "local.yaml")
    assert local.select("local") == ["localhost"]
    assert local.hosts["localhost"].connection == "local"
    example = load_inventory(ROOT / "inventory" / "example.yaml")
    assert example.select("blackwell") == ["gpu1"]
    gpu1 = example.hosts["gpu1"]
    assert (gpu1.jump, gpu1.connection) == ("bastion", "ssh")
    assert gpu1.jump in example.hosts
    assert example.ssh.known_hosts  # checked by default
