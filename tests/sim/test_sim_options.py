"""`orch sim serve` arguments: its own flags, vLLM's flags accepted and ignored, clear errors."""

from __future__ import annotations

import pytest

from orchestrator.sim.options import build_parser, parse_serve_args, split_argv


@pytest.mark.parametrize(
    ("argv", "known", "ignored"),
    [
        (["m", "--port", "9000"], ["m", "--port", "9000"], []),
        (["m", "--tensor-parallel-size", "8", "--trust-remote-code", "--port=1"],
         ["m", "--port=1"], [("tensor-parallel-size", "8"), ("trust-remote-code", None)]),
        (["--trust-remote-code", "m"], ["m"], [("trust-remote-code", None)]),
        (["m", "-tp", "8", "-O3", "--compilation-config", '{"cudagraph_mode":"PIECEWISE"}'],
         ["m"], [("tp", "8"), ("O3", None), ("compilation-config", '{"cudagraph_mode":"PIECEWISE"}')]),
        (["m", "--foo", "-1", "--no-enable-prefix-caching"], ["m"], [("foo", "-1"), ("no-enable-prefix-caching", None)]),
        (["m", "--served-model-name", "a", "b", "--kv-cache-dtype", "fp8", "--swap-space", "4"],
         ["m", "--served-model-name", "a", "b", "--kv-cache-dtype", "fp8"], [("swap-space", "4")]),
    ],
)  # fmt: skip
def test_split_argv(argv: list[str], known: list[str], ignored: list[tuple[str, str | None]]) -> None:
    assert split_argv(argv, build_parser()) == (known, ignored)


def test_defaults_come_from_the_profile() -> None:
    options = parse_serve_args(["org/model", "--profile", "minimax-m2.5-4x-ep"])
    assert (options.max_num_seqs, options.max_model_len) == (256, 196_608)
    assert options.served_names == ["org/model"]
    assert options.host == "0.0.0.0" and options.port == 8000
    assert options.time_scale == options.startup_time_scale == 1.0
    assert options.marker() == "profile=minimax-m2.5-4x-ep; time-scale=1.0"


def test_the_api_key_is_masked_in_non_default_args(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    options = parse_serve_args(["m", "--api-key", "sk-secret", "--max-model-len", "32k", "-tp", "8"])
    assert options.api_key == "sk-secret"
    assert options.non_default["api_key"] == "***"
    assert options.non_default["tp"] == 8
    assert options.max_model_len == 32_000
    assert options.tensor_parallel == 8


def test_the_api_key_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    assert parse_serve_args(["m"]).api_key == "from-env"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "a model is required"),
        (["m", "--time-scale", "0"], "--time-scale: expected a number greater than 0, got '0'"),
        (["m", "--time-scale", "fast"], "--time-scale: expected a number such as 0.01, got 'fast'"),
        (["m", "--kv-link-gbps", "0"], "--kv-link-gbps: expected Gbit/s greater than 0, got '0'"),
        (["m", "--kv-link-gbps", "inf"], "--kv-link-gbps: expected Gbit/s greater than 0, got 'inf'"),
        (["m", "--kv-link-gbps", "fast"], "--kv-link-gbps: expected Gbit/s such as 100, got 'fast'"),
        (["m", "--port", "70000"], "--port: expected a port between 1 and 65535, got 70000"),
        (["m", "--profile", "nope"], "--profile: invalid choice: 'nope'"),
        (["m", "--reasoning-parser", "nope"], "invalid reasoning parser: nope (chose from { deepseek_r1,"),
        (["m", "--fail-at-startup", "boom"], "--fail-at-startup: invalid choice: 'boom'"),
        (["m", "--vllm-version", "latest"], "invalid vLLM version 'latest'"),
        (["m", "--max-model-len", "big"], "expected a length such as 32768, 32k or 1M, got 'big'"),
        (["m", "--default-chat-template-kwargs", "[1]"], "expected a JSON object"),
        (["a", "--model", "b"], "two models given"),
    ],
)  # fmt: skip
def test_bad_arguments_are_explained(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_serve_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("usage: orch sim serve")
