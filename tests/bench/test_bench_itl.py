"""ITL per token, as vLLM's server counts it, and the asked input length as the length sent.

vLLM streams one chunk per generation step; its text can be empty (a partial UTF-8
character the detokenizer holds back) and a chunk can carry several tokens (steps merged
while the API server was behind). With `stream_options.continuous_usage_stats` every chunk
says the output tokens so far, so orch counts tokens, not texts: a request of N tokens has
N - 1 gaps, as the server's `vllm:inter_token_latency_seconds` histogram. Tables of records
in, figures out; the stream through real HTTP (benchmarks/stream_server.py with vLLM's
chunk habits); the prompts through a real BPE tokenizer trained here.
"""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any

import httpx
import pytest
from stream_server import chunk_sizes, running_stream_server
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from orchestrator.bench.request_record import RequestRecord, derive, token_gaps_ms, token_times_ns
from orchestrator.bench.sweep import run_sweep
from orchestrator.bench.tokens import TokenCounter
from orchestrator.bench.workload import PREFIX_WORDS, Workload
from orchestrator.plan.models import Bench

MS = 1_000_000


# -- per-token gaps: records in, figures out -------------------------------------------
@pytest.mark.parametrize(
    ("stamps_ms", "counts", "gaps_ms"),
    [
        ([10, 12, 14, 16], [1, 2, 3, 4], [2, 2, 2]),  # one token a chunk
        ([10, 12, 18], [1, 2, 5], [2, 2, 2, 2]),  # a chunk of 3 spreads its 6 ms
        ([10, 13], [2, 3], [3]),  # the first chunk's second token: before any gap
        ([10], [1], []),  # one token, no gap
        ([10, 11, 11], [1, 2, 4], [1, 0, 0]),  # two tokens in the same wake-up
    ],
)
def test_a_chunk_of_n_tokens_adds_n_gaps_of_its_gap_over_n(
    stamps_ms: list[int], counts: list[int], gaps_ms: list[float]
) -> None:
    assert token_gaps_ms([t * MS for t in stamps_ms], counts) == gaps_ms


def record(*, texts_ms: list[int], metered_ms: list[int], counts: list[int],
           unmetered: int = 0, usage: int | None = None) -> RequestRecord:
    r = RequestRecord("a", start_ns=0, end_ns=100 * MS)
    r.token_ns = [t * MS for t in texts_ms]
    r.content_chunks = len(texts_ms)
    r.metered_ns = [t * MS for t in metered_ms]
    r.metered_counts = counts
    r.metered_tokens = counts[-1] if counts else 0
    r.unmetered_chunks = unmetered
    r.completion_tokens = usage
    return r


@pytest.mark.parametrize(
    ("rec", "ttft_ms", "itls_ms", "source", "times_ms"),
    [
        # vLLM with per-chunk usage: the chunk at 12 ms had empty text (a partial UTF-8
        # byte), the one at 16 ms three tokens; 5 tokens, 4 gaps
        (record(texts_ms=[10, 16], metered_ms=[10, 12, 16], counts=[1, 2, 5], usage=5),
         10.0, (2.0, 4 / 3, 4 / 3, 4 / 3), "usage", [10, 12, 16, 16, 16]),
        # per-chunk usage that started late (text chunks without it): chunks, as before
        (record(texts_ms=[10, 16], metered_ms=[16], counts=[5], unmetered=1, usage=5),
         10.0, (6.0,), "chunks", [10, 16]),
        # no usage at all: the text chunks
        (record(texts_ms=[10, 12, 15], metered_ms=[], counts=[]),
         10.0, (2.0, 3.0), "chunks", [10, 12, 15]),
        # the first token's text held back: TTFT is the first token, not the first text
        (record(texts_ms=[14], metered_ms=[9, 14], counts=[1, 2], usage=2),
         9.0, (5.0,), "usage", [9, 14]),
    ],
)
def test_ttft_and_itl_of_a_record(rec: RequestRecord, ttft_ms: float, itls_ms: tuple[float, ...],
                                  source: str, times_ms: list[int]) -> None:
    metrics = derive(rec, 0)
    assert metrics.ttft_ms == ttft_ms
    assert metrics.itls_ms == pytest.approx(itls_ms)
    assert metrics.itl_source == source
    assert token_times_ns(rec) == [t * MS for t in times_ms]


# -- the stream, through real HTTP --------------------------------------------------------
TOKENS, EMPTY_EVERY, MERGE_EVERY = 32, 5, 7


def sweep_rows(tmp_path: Path, *server: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    args = ("--ttft-ms", "20", "--itl-ms", "2", "--record-timings", *server)
    with running_stream_server(*args) as url:
        run_sweep(Bench.model_validate({"concurrency": [2], "requests_per_level": 4, "warmup": 0,
                                        "max_tokens": TOKENS, "input_len": 8}),
                  base_url=url, model=None, api_key=None, out_dir=tmp_path)
        timings = httpx.get(f"{url}/timings").json()
    level = json.loads((tmp_path / "level-c2.json").read_text())
    rows = [json.loads(line) for line in (tmp_path / "requests-c2.jsonl").read_text().splitlines()]
    return level, rows, timings


def test_empty_and_merged_chunks_count_as_the_tokens_they_carry(tmp_path: Path) -> None:
    level, rows, timings = sweep_rows(tmp_path, "--empty-every", str(EMPTY_EVERY),
                                      "--merge-every", str(MERGE_EVERY))
    sizes = chunk_sizes(TOKENS, MERGE_EVERY)
    texts = sum(1 for first, size in zip(_firsts(sizes), sizes, strict=True)
                if any((i + 1) % EMPTY_EVERY for i in range(first, first + size)))
    assert level["itl_source"] == "usage" and level["completed"] == 4
    for row in rows:
        assert row["output_tokens"] == TOKENS
        assert len(row["itls_ms"]) == TOKENS - 1  # the server's count: one gap per token
        assert row["metered_chunks"] == len(sizes) == len(timings[row["request_id"]]["write_ns"])
        assert row["counted_chunks"] == texts < len(sizes)  # texts alone miss tokens
        # a chunk of two tokens adds two equal gaps; stamps in order: no gap below zero
        per_chunk = [list(g) for _, g in groupby(zip(_owners(sizes)[1:], row["itls_ms"], strict=True),
                                                 key=lambda pair: pair[0])]
        assert all(len({gap for _, gap in chunk}) == 1 for chunk in per_chunk)
        assert min(row["itls_ms"]) >= 0
        # the last token arrives within the request (the rows round each gap to 1 µs)
        assert row["ttft_ms"] + sum(row["itls_ms"]) <= row["e2el_ms"] + 1e-3 * len(row["itls_ms"])


def test_a_server_without_per_chunk_usage_keeps_the_gaps_between_text_chunks(tmp_path: Path) -> None:
    level, rows, _ = sweep_rows(tmp_path, "--empty-every", str(EMPTY_EVERY), "--no-continuous-usage")
    texts = TOKENS - TOKENS // EMPTY_EVERY
    assert level["itl_source"] == "chunks"
    for row in rows:
        assert row["output_tokens"] == TOKENS  # the final usage
        assert row["metered_chunks"] == 1 and row["counted_chunks"] == texts
        assert len(row["itls_ms"]) == texts - 1


def test_the_level_says_what_was_asked_and_what_the_server_counted(tmp_path: Path) -> None:
    level, rows, _ = sweep_rows(tmp_path)
    assert level["input_len"] == 8
    assert level["mean_input_tokens"] == 12  # the stream server's usage.prompt_tokens
    assert all(r["input_tokens"] == 12 for r in rows)


def _firsts(sizes: list[int]) -> list[int]:
    out, first = [], 0
    for size in sizes:
        out.append(first)
        first += size
    return out


def _owners(sizes: list[int]) -> list[int]:
    """The chunk each token came in."""
    return [k for k, size in enumerate(sizes) for _ in range(size)]


# -- the asked input length is the length sent ------------------------------------------
CORPUS = ["the of and to in is it you that he was for on are with as his they be at one",
          "have this from or had by word but what some we can out other were all there"]


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> TokenCounter:
    """A byte-level BPE trained on half of the synthetic words: the other half split into
    several tokens, as a real tokenizer splits rare words."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return TokenCounter(Tokenizer.from_file(str(path)), path)


def sent(workload: Workload, requests: int = 6) -> list[str]:
    out = []
    for i in range(requests):
        body = json.loads(workload.body(i))
        out.append(body["messages"][0]["content"] if "messages" in body else body["prompt"])
    return out


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("prefix", ["unique", "shared"])
@pytest.mark.parametrize("input_len", [1, 2, PREFIX_WORDS, PREFIX_WORDS + 1, 64, 200])
def test_with_a_tokenizer_every_prompt_sent_has_the_asked_tokens(
    counter: TokenCounter, input_len: int, prefix: str, endpoint: str
) -> None:
    config = Bench.model_validate({"input_len": input_len, "prompt_prefix": prefix,
                                   "endpoint": endpoint})
    workload = Workload(config, "m", tokens=counter)
    prompts = sent(workload)
    assert [counter.count(p) for p in prompts] == [input_len] * len(prompts)
    assert {counter.count(t) for t in workload.prompt_texts} == {input_len}  # the fallback count
    if prefix == "unique":
        assert len(set(prompts)) == len(prompts)  # no request is a prefix-cache hit


@pytest.mark.parametrize("input_len", [1, PREFIX_WORDS, 64])
def test_without_a_tokenizer_the_asked_length_is_words_prefix_included(input_len: int) -> None:
    workload = Workload(Bench.model_validate({"input_len": input_len}), "m")
    prompts = sent(workload)
    assert {len(p.split(" ")) for p in prompts} == {input_len}
    assert len(set(prompts)) == len(prompts)


def test_the_prefix_words_differ_from_the_first_word_on() -> None:
    """Requests in a row differ in their first word (the least significant digit), so not
    even the first cache block of two prompts is shared."""
    workload = Workload(Bench.model_validate({"input_len": 64, "seed": 1}), "m")
    firsts = [p.split()[0] for p in sent(workload, 3)]
    assert len(set(firsts)) == 3


@pytest.mark.parametrize(("prompt", "completion"), [(0, 0), (12, 1), (79, 128)])
def test_the_simulators_per_chunk_usage_is_its_usage_object(prompt: int, completion: int) -> None:
    """The simulator writes the usage of every chunk directly (orch asks for it in each):
    the same bytes as the JSON of its usage object."""
    from orchestrator.sim.wire import dumps, usage, usage_json

    assert usage_json(prompt, completion) == dumps(usage(prompt, completion))
