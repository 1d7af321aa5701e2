"""The simulator at the flags it is given: TP, DP and expert parallel change a measured
profile's step costs, limits and GPU figures through the what-if model (sim/deployment.py);
a deployment whose weights do not fit dies at start-up with vLLM's CUDA out-of-memory error,
which orch's diagnosis names; profiles without GPUs stay as they are."""

from __future__ import annotations

import pytest

from orchestrator.engines.signatures import diagnose
from orchestrator.engines.vllm.signatures import SIGNATURES
from orchestrator.sim import failures
from orchestrator.sim.options import parse_serve_args
from orchestrator.sim.profiles import KIMI_NVFP4, MINIMAX_EP, PROFILES
from orchestrator.sim.testing import start_simulator

KIMI_TP4_DP2 = ["--tensor-parallel-size", "4", "--data-parallel-size", "2"]


def test_default_flags_keep_the_calibrated_profile() -> None:
    options = parse_serve_args(["m", "--profile", MINIMAX_EP.name, "-tp", "4",
                                "--enable-expert-parallel"])
    assert options.profile.step_base_s == pytest.approx(MINIMAX_EP.step_base_s)
    assert options.profile.step_per_seq_s == pytest.approx(MINIMAX_EP.step_per_seq_s)
    assert options.profile.gpu == MINIMAX_EP.gpu
    assert options.fail_at_startup is None and options.data_parallel == 1


def test_tp_and_dp_change_the_engine() -> None:
    options = parse_serve_args(["m", "--profile", MINIMAX_EP.name, "--tensor-parallel-size", "2",
                                "--data-parallel-size", "2", "--enable-expert-parallel"])
    assert options.data_parallel == 2 and options.tensor_parallel == 2
    assert options.engine_max_num_seqs == 2 * 256
    assert options.engine_kv_tokens == 2 * options.kv_cache_tokens
    assert options.profile.step_per_seq_s < MINIMAX_EP.step_per_seq_s
    gpu, measured = options.profile.gpu, MINIMAX_EP.gpu
    assert gpu is not None and measured is not None
    assert gpu.pcie_bytes_per_token < measured.pcie_bytes_per_token  # rings of 2, not 4
    assert options.ignored == [("tensor-parallel-size", "2"), ("data-parallel-size", "2"),
                               ("enable-expert-parallel", None)]


def test_kimi_on_tp4_dp2_is_set_to_fail_as_vllm_would() -> None:
    options = parse_serve_args(["m", "--profile", KIMI_NVFP4.name, *KIMI_TP4_DP2])
    assert options.fail_at_startup == "cuda-oom"
    assert options.memory_note.startswith("weights 142 GiB per GPU > 95.6 GiB x 0.90")
    with_ep = parse_serve_args(["m", "--profile", KIMI_NVFP4.name, *KIMI_TP4_DP2,
                                "--enable-expert-parallel"])
    assert with_ep.fail_at_startup is None and with_ep.memory_note == ""


def test_profiles_without_gpus_ignore_the_deployment_flags() -> None:
    options = parse_serve_args(["m", "--profile", "instant", "-tp", "8", "-dp", "2"])
    assert options.profile == PROFILES["instant"] and options.data_parallel == 1


def test_a_bad_parallel_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_serve_args(["m", "--tensor-parallel-size", "eight"])
    assert exit_.value.code == 2
    assert "--tensor-parallel-size" in capsys.readouterr().err


@pytest.mark.slow
def test_a_deployment_that_does_not_fit_dies_loading_its_weights() -> None:
    sim = start_simulator(profile=KIMI_NVFP4.name, startup_time_scale=0.0005,
                          extra_args=KIMI_TP4_DP2)
    try:
        assert sim.wait_exit(timeout=30) == 1
    finally:
        sim.stop()
    log = sim.log()
    assert failures.CUDA_OOM in log and "Loading safetensors checkpoint shards:  60% Completed" in log
    assert "orch simulator: weights 142 GiB per GPU > 95.6 GiB x 0.90" in log
    assert "Ignoring vLLM flag --tensor-parallel-size" not in log  # modelled
    assert diagnose(log, SIGNATURES)[0].key == "weight-load-oom"
