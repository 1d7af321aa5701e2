"""Request bodies, datasets and the `orch bench` options (pure, plus a real file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from orchestrator.bench.workload import DEFAULT_PROMPT, Workload, load_dataset
from orchestrator.commands.bench import bench_config, configure
from orchestrator.errors import BenchError
from orchestrator.plan.models import Bench


def bodies(**config: object) -> list[dict[str, object]]:
    workload = Workload(Bench.model_validate(config), "kimi")
    return [json.loads(b) for b in workload.bodies]


def test_default_chat_body_streams_with_usage_and_the_guide_prompt() -> None:
    (body,) = bodies()
    assert body == {
        "model": "kimi",
        "messages": [{"role": "user", "content": DEFAULT_PROMPT}],
        "max_tokens": 1024,
        "max_completion_tokens": 1024,
        "stream": True,
        # continuous usage: each chunk says how many tokens it brought (test_bench_itl.py)
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    assert "step-by-step guide" in DEFAULT_PROMPT


def test_options_reach_the_body() -> None:
    (body,) = bodies(
        max_tokens=64, ignore_eos=True, temperature=0.0, thinking=False,
        chat_template_kwargs={"x": 1}, extra_body={"top_k": 5},
    )
    assert body["max_completion_tokens"] == 64
    assert body["ignore_eos"] is True and body["temperature"] == 0.0
    assert body["chat_template_kwargs"] == {"x": 1, "thinking": False, "enable_thinking": False}
    assert body["top_k"] == 5


def test_completions_body() -> None:
    (body,) = bodies(endpoint="completions", prompt="Once")
    assert body["prompt"] == "Once" and "messages" not in body and body["max_tokens"] == 1024


def test_synthetic_prompts_have_the_target_length_and_differ() -> None:
    workload = Workload(Bench.model_validate({"input_len": 200}), "kimi")
    texts = {json.loads(workload.body(i))["messages"][0]["content"] for i in range(70)}
    assert len(texts) == 70  # 64 prompts, and a unique prefix on each request
    assert all(len(t.split()) == 200 for t in texts)  # the prefix's words included


def test_dataset_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a", "max_tokens": 7}\n\n{"messages": [{"role": "user", "content": "b"}]}\n')
    prompts = load_dataset(path)
    assert [p.text for p in prompts] == ["a", None]
    assert prompts[0].max_tokens == 7
    found = bodies(dataset=str(path))
    assert found[0]["max_completion_tokens"] == 7
    assert found[1]["messages"] == [{"role": "user", "content": "b"}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a"}\nnot json\n', r"d\.jsonl:2: not valid JSON"),
        ('["a"]\n', r"d\.jsonl:1: expected a JSON object"),
        ('{"text": "a"}\n', r"d\.jsonl:1: expected a `prompt` string"),
        ('{"prompt": "a", "max_tokens": 0}\n', r"d\.jsonl:1: max_tokens must be a positive integer"),
        ("\n", "holds no requests"),
    ],
)
def test_bad_datasets_are_reported_with_their_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(content)
    with pytest.raises(BenchError, match=message):
        load_dataset(path)


def test_a_missing_dataset_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="cannot read the dataset"):
        load_dataset(tmp_path / "missing.jsonl")


def _parse(*argv: str) -> dict[str, object]:
    import argparse

    parser = argparse.ArgumentParser()
    configure(parser)
    return bench_config(parser.parse_args(["--url", "http://127.0.0.1:1", *argv]))


def test_cli_options_map_to_the_plan_section() -> None:
    data = _parse("--concurrency", "1,2,4", "--requests", "2x", "--max-tokens", "64", "--thinking", "off",
                  "--goodput", "ttft:500", "--no-metrics")
    assert data == {
        "concurrency": [1, 2, 4], "requests_per_level": "2x", "max_tokens": 64, "thinking": False,
        "slo": {"ttft_ms": 500.0}, "metrics_interval": None,
    }
    config = Bench.model_validate(data)
    assert config.requests_for(4) == 8
    assert _parse("--concurrency", "auto", "--auto-max-concurrency", "64") == {
        "concurrency": "auto", "auto": {"max_concurrency": 64},
    }
    assert _parse("--rate", "2,4.5", "--duration", "30s") == {"rate": [2.0, 4.5], "duration": "30s"}
    assert Bench.model_validate({"duration": "30s"}).duration == 30.0


def test_vllm_bench_serve_flags_mean_what_they_mean_there() -> None:
    # --max-concurrency caps requests in flight: without a rate, closed levels at each cap
    assert _parse("--max-concurrency", "1,8,64", "--num-prompts", "200") == {
        "concurrency": [1, 8, 64], "requests_per_level": 200}
    # ... with a finite rate, the cap of those open-loop levels
    assert _parse("--request-rate", "4,8", "--max-concurrency", "16") == {
        "rate": [4.0, 8.0], "max_in_flight": 16}
    # inf and no cap: every prompt at once (vllm's default of 1000 prompts)
    assert _parse("--request-rate", "inf") == {
        "mode": "batch", "concurrency": [1000], "requests_per_level": 1000}
    assert _parse("--request-rate", "inf", "--max-concurrency", "32") == {"concurrency": [32]}
    data = _parse("--goodput", "ttft:500", "tpot:50", "e2el:10000", "--metric-percentiles", "50,95,99.9",
                  "--percentile-metrics", "ttft,e2el", "--seed", "7", "--num-warmups", "2",
                  "--extra-body", '{"top_k": 20, "chat_template_kwargs": {"thinking": true}}')
    assert data == {
        "slo": {"ttft_ms": 500.0, "tpot_ms": 50.0, "e2el_ms": 10000.0},
        "percentiles": [50.0, 95.0, 99.9], "percentile_metrics": ["ttft", "e2el"], "seed": 7,
        "warmup": 2, "extra_body": {"top_k": 20, "chat_template_kwargs": {"thinking": True}},
    }
    config = Bench.model_validate(data)
    assert config.slo.tpot_ms == 50.0 and config.percentiles == [50.0, 95.0, 99.9]


@pytest.mark.parametrize("argv, message", [
    (("--max-concurrency", "8", "--concurrency", "8"), "both give closed levels"),
    (("--request-rate", "inf,4"), "cannot be mixed"),
    (("--request-rate", "4,8", "--max-concurrency", "8,16"), "one cap"),
    (("--auto-max-concurrency", "64",), "tune --concurrency auto"),
    (("--concurrency", "1,2", "--burstiness", "0.5"), "finite --request-rate"),
    (("--request-rate", "inf", "--num-prompts", "2x"), "give it as a count"),
])
def test_flags_that_would_have_no_effect_are_refused(argv: tuple[str, ...], message: str) -> None:
    from orchestrator.errors import UsageError

    with pytest.raises(UsageError, match=message):
        _parse(*argv)


@pytest.mark.parametrize(
    "argv",
    [("--concurrency", "1,two"), ("--rate", "fast"), ("--requests", "10", "--duration", "30s"),
     ("--goodput", "ttfb:500"), ("--goodput", "ttft:-1"), ("--extra-body", "[1]"),
     ("--extra-body", "{nope"), ("--metric-percentiles", "p99"), ("--max-concurrency", "auto")],
)
def test_cli_rejects_bad_options(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit):
        _parse(*argv)


def test_every_flag_is_a_field_of_the_bench_model_with_its_help() -> None:
    from orchestrator.commands.bench import FLAGS, _field

    parser = argparse.ArgumentParser()
    configure(parser)
    helps = {a.option_strings[0]: a.help or "" for a in parser._actions if a.option_strings}
    for names, path, _ in FLAGS:
        description = (_field(path).description or "").rstrip(".")
        assert helps[names[0]].startswith(description), names
    assert "{closed,batch}" in parser.format_help()  # choices from the model's Literal


def test_every_request_gets_a_prompt_of_its_own_by_default() -> None:
    workload = Workload(Bench.model_validate({}), "kimi")
    sent = [json.loads(workload.body(0))["messages"][0]["content"] for _ in range(3)]
    assert len(set(sent)) == 3  # three requests, three prompts: no prefix-cache hit
    for text in sent:
        prefix, _, rest = text.partition("] ")
        assert prefix.startswith("[r") and rest == DEFAULT_PROMPT
    other = Workload(Bench.model_validate({}), "kimi")  # a rerun misses the cache too
    assert json.loads(other.body(0))["messages"][0]["content"] not in sent


def test_a_shared_prefix_sends_the_same_prompt_every_time() -> None:
    workload = Workload(Bench.model_validate({"prompt_prefix": "shared"}), "kimi")
    assert workload.body(0) == workload.body(0) == workload.bodies[0]


def test_the_unique_prefix_goes_before_a_datasets_first_user_message(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "system", "content": "be brief"},
                                             {"role": "user", "content": "hi"}]}) + "\n")
    workload = Workload(Bench.model_validate({"dataset": str(path)}), "kimi")
    messages = json.loads(workload.body(0))["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["content"].startswith("[r") and messages[1]["content"].endswith("] hi")
