"""Request bodies, datasets and the `orch bench` options (pure, plus a real file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from orchestrator.bench.cli import bench_config, configure
from orchestrator.bench.workload import DEFAULT_PROMPT, Workload, load_dataset
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
        "stream_options": {"include_usage": True},
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
    found = bodies(input_len=200)
    texts = {b["messages"][0]["content"] for b in found}  # type: ignore[index]
    assert len(texts) == len(found) > 1
    assert all(len(t.split()) == 200 for t in texts)


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
                  "--slo-ttft-ms", "500", "--no-metrics")
    assert data == {
        "concurrency": [1, 2, 4], "requests_per_level": "2x", "max_tokens": 64, "thinking": False,
        "slo": {"ttft_ms": 500.0}, "metrics_interval": None,
    }
    config = Bench.model_validate(data)
    assert config.requests_for(4) == 8
    assert _parse("--concurrency", "auto", "--max-concurrency", "64") == {
        "concurrency": "auto", "auto": {"max_concurrency": 64},
    }
    assert _parse("--rate", "2,4.5", "--duration", "30s") == {"rate": [2.0, 4.5], "duration": "30s"}
    assert Bench.model_validate({"duration": "30s"}).duration == 30.0


@pytest.mark.parametrize(
    "argv",
    [("--concurrency", "1,two"), ("--rate", "fast"), ("--requests", "10", "--duration", "30s")],
)
def test_cli_rejects_bad_options(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit):
        _parse(*argv)


def test_every_flag_is_a_field_of_the_bench_model_with_its_help() -> None:
    from orchestrator.bench.cli import FLAGS, _field

    parser = argparse.ArgumentParser()
    configure(parser)
    helps = {a.option_strings[0]: a.help or "" for a in parser._actions if a.option_strings}
    for flag, path, _ in FLAGS:
        description = (_field(path).description or "").rstrip(".")
        assert helps[flag].startswith(description), flag
    assert "{closed,batch}" in parser.format_help()  # choices from the model's Literal
