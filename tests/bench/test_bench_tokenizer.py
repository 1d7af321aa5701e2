"""`orch bench --tokenizer PATH`: a server that sends no usage and merges tokens into chunks
(tests/fixtures/strict_server.py, per_chunk) is counted with the user's local tokenizer,
the way `vllm bench serve --tokenizer` counts, and the results say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.orchcli import orch
from fixtures.strict_server import strict_server
from tokenizers import Tokenizer, models, pre_tokenizers

from orchestrator.bench.request_record import RequestRecord, derive
from orchestrator.bench.sse_bytes import json_string_body
from orchestrator.bench.tokens import decode_text, load_tokenizer

CHUNKS, PER_CHUNK = 3, 4  # each word `w<n> "q"\` is 4 tokens: w<n>, ", q, "\ (unknown)


def make_tokenizer(folder: Path) -> Path:
    words = ["[UNK]", '"', "q"] + [f"w{n}" for n in range(CHUNKS * PER_CHUNK)]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def run(tmp_path: Path, *extra: str) -> tuple[int, str, list[dict], dict]:
    out = tmp_path / "out"
    with strict_server(slots=2, tokens=CHUNKS, per_chunk=PER_CHUNK) as (url, _):
        result = orch("bench", "--url", url, "--model", "tiny", "--concurrency", "2",
                      "--num-prompts", "4", "--max-tokens", "64", "--prompt", "alpha beta gamma",
                      "--result-dir", out, *extra, cwd=tmp_path, timeout=120)
    said = result.stdout + result.stderr
    if result.returncode:
        return result.returncode, said, [], {}
    rows = [json.loads(line) for line in (out / "requests-c2.jsonl").read_text().splitlines()]
    return result.returncode, said, rows, json.loads((out / "level-c2.json").read_text())


@pytest.mark.slow
def test_tokens_are_counted_by_the_given_tokenizer_when_the_server_sends_no_usage(
    tmp_path: Path,
) -> None:
    tokenizer = make_tokenizer(tmp_path / "tok")
    code, said, rows, level = run(tmp_path, "--tokenizer", str(tokenizer))
    assert code == 0, said
    assert rows and all(r["ok"] for r in rows)
    for row in rows:
        assert row["counted_chunks"] == CHUNKS
        assert row["output_tokens"] == CHUNKS * PER_CHUNK * 4, row
        assert row["token_source"] == "tokenizer"
        assert row["input_tokens"] == 3  # the prompt's own words, not orch's unique prefix
    assert level["token_source"] == "tokenizer"
    assert level["total_output_tokens"] == 4 * CHUNKS * PER_CHUNK * 4
    assert level["tokenizer_id"] == str(tokenizer)
    assert "tokens by the tokenizer" in said


@pytest.mark.slow
def test_without_a_tokenizer_the_chunks_are_counted_and_said_so(tmp_path: Path) -> None:
    code, said, rows, level = run(tmp_path)
    assert code == 0, said
    assert {r["output_tokens"] for r in rows} == {CHUNKS}
    assert level["token_source"] == "counted" and "tokens counted from chunks" in said


@pytest.mark.slow
def test_a_tokenizer_path_that_holds_none_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, said, _, _ = run(tmp_path, "--tokenizer", str(tmp_path / "empty"))
    assert code != 0
    assert "no tokenizer at" in said and "tokenizer.json" in said
    assert "Traceback" not in said


def test_a_chunks_text_is_cut_at_its_unescaped_closing_quote() -> None:
    # the hot path keeps a JSON string's body as it stands: a backslash before the closing
    # quote is escaped itself, an escaped quote is inside
    payload = b'{"delta":{"content":"a\\\\"},"x":1}'
    start = payload.index(b'"a') + 1
    assert json_string_body(payload, start) == b"a\\\\"
    payload = b'{"delta":{"content":"say \\"hi\\" \\\\\\" now"}}'
    start = payload.index(b'"say') + 1
    assert decode_text([json_string_body(payload, start)]) == 'say "hi" \\" now'


def test_reasoning_is_counted_apart_and_odd_text_never_loses_the_level(tmp_path: Path) -> None:
    counter = load_tokenizer(make_tokenizer(tmp_path / "tok"))
    answered = RequestRecord("a", status=200)
    answered.text_raw = [b"w0 \\ud83d", b" w1"]  # a lone surrogate, as a server may send
    answered.reasoning_raw = [b"w2"]
    silent = RequestRecord("b", status=200)  # answered, with no text at all
    failed = RequestRecord("c", status=500)
    failed.fail("http_500", "HTTP 500")
    counter.fill([answered, silent, failed], ["w3 w4"])
    assert (answered.tokenized_tokens, answered.tokenized_reasoning_tokens) == (4, 1)
    assert answered.tokenized_prompt_tokens == 2 and answered.text_raw is None
    assert silent.tokenized_tokens == 0
    assert failed.tokenized_tokens is None
    metrics = derive(answered, answered.start_ns)
    assert (metrics.token_source, metrics.output_tokens) == ("tokenizer", 4)
    assert (metrics.reasoning_tokens, metrics.content_tokens) == (1, 3)
