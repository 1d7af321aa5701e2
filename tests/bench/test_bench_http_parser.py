"""The streaming parser fed raw bytes exactly as a socket may deliver them: HTTP framing,
chunked transfer decoding, SSE splitting and the cheap event classification."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.bench.http_stream import StreamConnection, parse_target
from orchestrator.bench.request_record import RequestRecord
from orchestrator.errors import BenchError

HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(obj: object) -> bytes:
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return b"data: " + text.encode() + b"\n\n"


def delta(**fields: object) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": fields, "logprobs": None, "finish_reason": None}],
    }


def finish(reason: str) -> dict[str, object]:
    body = delta()
    body["choices"][0]["finish_reason"] = reason  # type: ignore[index]
    return body


USAGE = {"id": "x", "choices": [], "usage": {"prompt_tokens": 12, "total_tokens": 17, "completion_tokens": 5}}

# a vLLM 0.17-style reasoning stream: role chunk, 2 reasoning, a boundary chunk carrying both,
# 2 content chunks, an empty final chunk with finish_reason, usage, [DONE]
EVENTS = [
    sse(delta(role="assistant", content="")),
    sse(delta(reasoning="Let")),
    sse(delta(reasoning=" me \"think\"")),
    sse(delta(reasoning=".", content="Hello")),
    sse(delta(content=" world")),
    sse(delta(content="!")),
    sse(finish("length")),
    sse(USAGE),
    sse("[DONE]"),
]
BODY = HEAD.encode() + b"".join(chunk(e) for e in EVENTS) + b"0\r\n\r\n"


def feed(pieces: list[bytes], *, completions: bool = False) -> tuple[RequestRecord, StreamConnection]:
    async def go() -> tuple[RequestRecord, StreamConnection]:
        connection = StreamConnection()
        record = RequestRecord("t")
        done = connection.begin(record, completions=completions)
        for piece in pieces:
            connection.data_received(piece)
        assert done.done(), "the response did not complete"
        record.finish()
        return record, connection

    return asyncio.run(go())


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def test_a_reasoning_stream_is_classified_and_completed() -> None:
    record, connection = feed([BODY])
    assert record.ok and record.status == 200
    assert len(record.token_ns) == 5  # role chunk and empty final chunk carry no token
    assert record.reasoning_chunks == 2
    assert record.content_chunks == 3  # the boundary chunk counts as content
    assert record.first_content_ns == record.token_ns[2]
    assert record.finish_reason == "length"
    assert record.completion_tokens == 5 and record.prompt_tokens == 12
    assert connection.reusable


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_split_of_the_bytes_gives_the_same_result(cuts: list[int]) -> None:
    record, connection = feed(split(BODY, cuts))
    assert len(record.token_ns) == 5
    assert (record.reasoning_chunks, record.content_chunks) == (2, 3)
    assert record.finish_reason == "length"
    assert record.completion_tokens == 5
    assert connection.reusable
    assert record.token_ns == sorted(record.token_ns)


def test_several_events_in_one_chunk_and_one_event_across_chunks() -> None:
    blob = b"".join(EVENTS)
    body = HEAD.encode() + chunk(blob[:7]) + chunk(blob[7:300]) + chunk(blob[300:]) + b"0\r\n\r\n"
    record, _ = feed([body])
    assert len(record.token_ns) == 5 and record.completion_tokens == 5


def test_crlf_line_ends_comments_and_multiline_data_are_understood() -> None:
    events = [
        b": keep-alive comment\r\n\r\n",
        b"event: message\r\ndata: " + json.dumps(delta(content="a")).encode() + b"\r\n\r\n",
        b"data:" + json.dumps(delta(content="b")).encode() + b"\r\n\r\n",
        b"data: [DONE]\r\n\r\n",
    ]
    body = HEAD.encode() + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"
    for pieces in ([body], [body[i : i + 3] for i in range(0, len(body), 3)]):
        record, _ = feed(pieces)
        assert record.content_chunks == 2 and record.ok


def test_reasoning_content_of_older_vllm_counts_and_its_null_does_not() -> None:
    # 0.11.1-0.15 put "reasoning_content":null on every plain content delta
    events = [
        sse(delta(reasoning_content="hmm")),
        sse(delta(content="A", reasoning_content=None)),
        sse(delta(content="B", reasoning=None, reasoning_content=None)),
        sse("[DONE]"),
    ]
    record, _ = feed([HEAD.encode() + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"])
    assert (record.reasoning_chunks, record.content_chunks) == (1, 2)
    assert record.completion_tokens is None  # no usage: the caller counts chunks


def test_completions_endpoint_text_chunks() -> None:
    events = [
        sse({"choices": [{"index": 0, "text": "Hi", "finish_reason": None}]}),
        sse({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}),
        sse("[DONE]"),
    ]
    record, _ = feed([HEAD.encode() + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"], completions=True)
    assert record.content_chunks == 1 and record.finish_reason == "stop"


def test_an_error_event_after_streaming_started_fails_the_request() -> None:
    error = {"error": {"message": "engine died", "type": "InternalServerError", "param": None, "code": 500}}
    events = [sse(delta(content="x")), b"data: " + json.dumps(error).encode() + b"\n\n", sse("[DONE]")]
    record, _ = feed([HEAD.encode() + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"])
    assert record.error_kind == "stream_error:InternalServerError"
    assert record.error_message == "engine died"


def test_an_http_error_with_a_json_body() -> None:
    body = b'{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}'
    head = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    record, connection = feed([head + body[:10], body[10:]])
    assert record.error_kind == "http_404"
    assert record.error_message == "HTTP 404 Not Found: The model `x` does not exist."
    assert connection.reusable


def test_the_flat_401_of_vllm_api_key_middleware() -> None:
    body = b'{"error":"Unauthorized"}'
    head = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: %d\r\n\r\n" % len(body)
    record, _ = feed([head + body])
    assert (record.error_kind, record.error_message) == ("http_401", "HTTP 401 Unauthorized: Unauthorized")


def test_an_empty_400_says_its_status_reason_and_that_the_body_was_empty() -> None:
    # llama.cpp's server, asked with an x-request-id that is not a UUID.
    record, _ = feed([b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"])
    assert (record.error_kind, record.error_message) == ("http_400", "HTTP 400 Bad Request (empty body)")


def test_trailers_after_the_last_chunk_are_consumed() -> None:
    body = HEAD.encode() + chunk(sse(delta(content="x"))) + b"0\r\nx-trailer: 1\r\n\r\n"
    record, connection = feed([body])
    assert record.ok and connection.reusable


def test_connection_close_makes_the_connection_single_use() -> None:
    head = HEAD.replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n").encode()
    _, connection = feed([head + chunk(sse("[DONE]")) + b"0\r\n\r\n"])
    assert not connection.reusable


def test_garbage_instead_of_http_fails_cleanly() -> None:
    record, connection = feed([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"])
    assert record.error_kind == "bad_response"
    assert not connection.reusable


def test_a_bad_chunk_size_fails_cleanly() -> None:
    record, _ = feed([HEAD.encode() + b"zz\r\nhello\r\n"])
    assert record.error_kind == "bad_response"


@pytest.mark.parametrize(
    ("url", "root", "host_header"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", "127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000", "127.0.0.1:8000"),
        ("https://example.org/proxy/v1", "https://example.org/proxy", "example.org"),
        ("http://[::1]:9000", "http://[::1]:9000", "[::1]:9000"),
    ],
)
def test_parse_target(url: str, root: str, host_header: str) -> None:
    target = parse_target(url)
    assert target.root == root
    assert target.host_header == host_header


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://x", "http://", "http://h:99999"])
def test_parse_target_rejects_what_is_not_a_server_url(url: str) -> None:
    with pytest.raises(BenchError):
        parse_target(url)
