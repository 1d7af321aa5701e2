"""Byte-level pieces of the streaming parser (`http_stream.py`): the body of a JSON string,
a chunk-size line with extensions, SSE's CR line ends and an event's data in its general
form. Only `json_string_body` runs for every chunk (when text is kept); the others serve
the rare forms, off the hot path."""

from __future__ import annotations


def json_string_body(payload: bytes, start: int) -> bytes:
    """The JSON string body that starts at `start`, up to its unescaped closing quote."""
    end = start
    while True:
        end = payload.find(b'"', end)
        if end < 0:
            end = len(payload)
            break
        slashes = 0
        while payload[end - 1 - slashes] == 0x5C:  # backslashes before the quote
            slashes += 1
        if slashes % 2 == 0:
            break
        end += 1
    return payload[start:end]


def extended_chunk_size(size_text: bytes) -> int:
    """The size of a chunk line with extensions (`;name=value`); -1 for garbage."""
    try:
        return int(size_text.split(b";", 1)[0], 16)
    except ValueError:
        return -1


def lf_line_ends(body: bytes) -> bytes:
    """SSE allows CRLF and CR line ends; hold back a final CR that may pair with LF."""
    hold = body.endswith(b"\r")
    if hold:
        body = body[:-1]
    body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if hold:
        body += b"\r"
    return body


def data_of(event: bytes) -> bytes | None:
    """The data of one SSE event in its general form (several lines, comments, fields)."""
    data: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value[:1] == b" " else value)
    return b"\n".join(data) if data else None
