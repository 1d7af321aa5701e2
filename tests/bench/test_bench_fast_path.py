"""The parser's fast paths give the key scan's exact result: events of a learned shape
(`sse_events.read_shaped`) and runs of whole HTTP chunks (`sse_events.whole_chunks`), fed
streams that mix vLLM's chunks with everything that must leave the fast path (quotes and
backslashes in the text, raw bytes that break the JSON, per-chunk usage, odd chunk sizes,
errors, multi-line events), cut into reads anywhere."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.bench.http_stream import StreamConnection
from orchestrator.bench.request_record import RequestRecord
from orchestrator.bench.sse_events import classify, read_shaped, whole_chunks

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
PREFIX = '{"id":"chatcmpl-7","object":"chat.completion.chunk","created":17,"model":"m","choices":['


def chunk_event(key: str, value: str, *, finish: str = "null", usage: int | None = None,
                raw: bool = False) -> bytes:
    """A vLLM chat chunk; `raw`: the value goes in unescaped (broken JSON on purpose)."""
    text = value if raw else json.dumps(value)[1:-1]
    tail = "" if usage is None else (
        f',"usage":{{"prompt_tokens":5,"total_tokens":{5 + usage},"completion_tokens":{usage}}}')
    body = (PREFIX + f'{{"index":0,"delta":{{"{key}":"{text}"}},"logprobs":null,'
            f'"finish_reason":{finish},"token_ids":null}}]{tail}}}')
    return b"data: " + body.encode() + b"\n\n"


TEXT = st.text(alphabet=st.sampled_from(list('ab w"\\\n}{:,0é')), max_size=6)
RAW = st.text(alphabet=st.sampled_from(list('ab"\\}{:,05')), max_size=8)
KEY = st.sampled_from(["content", "reasoning", "reasoning_content"])
EVENT = st.one_of(
    st.builds(lambda v: chunk_event("content", v), st.text(alphabet="abc xyz", min_size=1, max_size=5)),
    st.builds(lambda k, v: chunk_event(k, v), KEY, TEXT),
    st.builds(lambda k, v: chunk_event(k, v, raw=True), KEY, RAW),
    st.builds(lambda k, v, n: chunk_event(k, v, usage=n), KEY, TEXT, st.integers(0, 12_000)),
    st.builds(lambda v: chunk_event("content", v, finish='"length"'), TEXT),
    st.sampled_from([
        b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}}\n\n',
        b'data: {"error":{"message":"boom","code":500}}\n\n',
        b"data: [DONE]\n\n",
        b": a comment\n\n",
        b"data: " + PREFIX.encode() + b'{"index":0,"delta":{"reasoning":"a","content":"b"}}]}\n\n',
        b"data: " + PREFIX.encode() + b'{"index":0,\ndata: "delta":{"content":"two lines"}}]}\n\n',
        chunk_event("content", "x")[:-2] + b' "finish_reason":"stop"\n\n',  # bytes after the end
        chunk_event("content", "y", usage=3).replace(b'tokens":3}', b'tokens":"3"}'),  # not a count
        chunk_event("content", "z", usage=3).replace(b":3}", b':3,"usage":{}}'),  # a second usage
    ]),
)


def framed(events: list[bytes], sizes: list[int], one_per_chunk: bool) -> bytes:
    """The events as a chunked body: one chunk each, or cut at the given sizes."""
    stream = b"".join(events)
    if one_per_chunk:
        pieces = events
    else:
        pieces, at = [], 0
        for size in sizes * (len(stream) // max(sum(sizes), 1) + 1):
            if at >= len(stream):
                break
            pieces.append(stream[at : at + size])
            at += size
        pieces.append(stream[at:])
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"


def fields(record: RequestRecord) -> dict[str, object]:
    return {
        "tokens": len(record.token_ns), "content": record.content_chunks,
        "reasoning": record.reasoning_chunks, "unmetered": record.unmetered_chunks,
        "metered": record.metered_counts, "metered_stamps": len(record.metered_ns),
        "finish": record.finish_reason, "usage": record.usage_raw, "error_raw": record.error_raw,
        "text": record.text_raw, "reasoning_text": record.reasoning_raw,
        "error": record.error_kind, "first_content": bool(record.first_content_ns),
    }


def through_client(body: bytes, cuts: list[int], keep_text: bool) -> dict[str, object]:
    async def go() -> dict[str, object]:
        connection = StreamConnection()
        record = RequestRecord("t")
        done = connection.begin(record, completions=False, keep_text=keep_text)
        data = HEAD + body
        points = sorted({c % (len(data) + 1) for c in cuts})
        for a, b in zip([0, *points], [*points, len(data)], strict=True):
            if b > a:
                connection.data_received(data[a:b])
        assert done.done(), "the response did not complete"
        return fields(record)

    return asyncio.run(go())


def by_scan(events: list[bytes], keep_text: bool) -> dict[str, object]:
    """Every event through the key scan alone (no shape, no chunk run)."""
    record = RequestRecord("t")
    for event in b"".join(events).split(b"\n\n")[:-1]:
        classify(record, event, 1, False, keep_text)
    return fields(record)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(EVENT, min_size=1, max_size=80),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=5),
    one_per_chunk=st.booleans(),
    cuts=st.lists(st.integers(0, 1 << 20), max_size=6),
    keep_text=st.booleans(),
)
@pytest.mark.slow
def test_fast_paths_agree_with_the_key_scan(
    events: list[bytes], sizes: list[int], one_per_chunk: bool, cuts: list[int], keep_text: bool
) -> None:
    body = framed(events, sizes, one_per_chunk)
    assert through_client(body, cuts, keep_text) == by_scan(events, keep_text)


def test_a_stream_of_one_shape_is_read_without_the_scan() -> None:
    events = [chunk_event("content", f" w{i}", usage=i + 1)[:-2] for i in range(50)]
    record = RequestRecord("t")
    shape = classify(record, events[0], 1, False, True)
    assert shape is not None and shape.count_group
    assert read_shaped(record, shape, events, 1, 2, True, False) == 50  # all of them
    assert (record.content_chunks, record.metered_counts[-1], record.unmetered_chunks) == (50, 50, 0)
    assert record.text_raw == [f" w{i}".encode() for i in range(50)]
    assert record.usage_raw is not None and record.usage_raw.endswith(b'"completion_tokens":50}}')
    # the last chunk (finish_reason), a quote in the text: where the run stops
    tail = [chunk_event("content", 'say "hi"')[:-2], chunk_event("content", "x", finish='"stop"')[:-2]]
    assert read_shaped(record, shape, [*events[:3], *tail], 0, 3, False, False) == 3


def test_whole_chunks_leaves_anything_unusual_to_the_byte_loop() -> None:
    events = [chunk_event("content", f"w{i}") for i in range(4)]
    good = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
    joined, end = whole_chunks(good + b"0\r\n\r\n", 0) or (b"", 0)
    assert (joined, end) == (b"".join(events), len(good))  # stops before the last chunk
    part = good + b"%x\r\n%s" % (len(events[0]), events[0][:10])
    assert whole_chunks(part, 0) == (b"".join(events), len(good))  # a chunk not yet whole
    wrong = good.replace(b"%x\r\n" % len(events[1]), b"%x\r\n" % (len(events[1]) + 1), 1)
    assert whole_chunks(wrong, 0) is None
    assert whole_chunks(good.replace(b"\r\n", b";x=1\r\n", 1), 0) is None  # an extension
    assert whole_chunks(b"0\r\n\r\n", 0) is None
