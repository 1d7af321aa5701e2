"""Classifying SSE events: the general scan, and the shape that lets most events skip it.

`classify` reads one event with one regular-expression pass over the keys that matter.
That pass costs about as much as everything else per token together, so a connection
learns a `Shape` from an event the scan found simple (one non-empty text string, then at
most a usage object and its running `completion_tokens`): the bytes before the string's
value (`prefix`) and after it (`suffix`, its digit runs free). vLLM's chunks of one
response differ only there (the text, the usage counts), so the next event is checked with
`startswith`, one `find` and a comparison, and gives the scan's exact result: the scan sees
the same keys at the same places, because the value holds no quote and digits only ever
replace digits (the keys' names hold none). Anything else (an escaped quote, the last chunk's
`finish_reason`, an error) goes to the scan.

`whole_chunks` decodes the common run of whole HTTP chunks of a read in C-level operations
(one split, the sizes checked all at once) and leaves anything else to the byte loop.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from orchestrator.bench.request_record import RequestRecord
from orchestrator.bench.sse_bytes import data_of, json_string_body
from orchestrator.masking import mask_bytes

# The keys whose values matter, with the first byte of a string value or the "{" of the
# usage object; `"finish_reason":null` and `"content":null` do not match. Inside a JSON
# string a quote is escaped, so a key can never be matched inside a value.
# The same pass finds a usage object's running output token count (`completion_tokens`,
# its digits in group 2; the key `completion_tokens_details` does not match).
_KEYS = re.compile(
    rb'"(content|reasoning|reasoning_content|text|arguments|finish_reason|usage|completion_tokens)"'
    rb'[ \t]*:[ \t]*(["{]|\d+)'
)
_COMPLETION_TOKENS = b"completion_tokens"
_TEXT_KEYS = frozenset((b"content", b"text", b"arguments"))
_REASONING_KEYS = frozenset((b"reasoning", b"reasoning_content"))
_DIGIT_RUNS = re.compile(rb"(\d+)")
_SIXTEEN = itertools.repeat(16)


@dataclass(frozen=True, slots=True)
class Shape:
    """The learned shape of a simple event (see the module docstring)."""

    prefix: bytes  # `data: ` and the payload up to the text value's first byte
    head: bytes  # the suffix (from the value's closing quote) up to its first digit
    size: int  # the suffix's length when it has no digits
    tail: re.Pattern[bytes] | None  # the rest of the suffix, its digit runs free
    count_group: int  # the tail's group of `completion_tokens`' digits; 0: none
    content: bool  # a content (or completions text) value, else reasoning
    usage: bool  # the suffix holds a usage object


def read_shaped(record: RequestRecord, shape: Shape, events: list[bytes], at: int,
                now: int, keep_text: bool, lone_lf: bool) -> int:
    """Read the events of `shape` from `at` on; where the first other one is.
    `lone_lf`: some event holds a line end (else none does: checked once per read)."""
    prefix, head, size, tail, group = shape.prefix, shape.head, shape.size, shape.tail, shape.count_group
    start = len(prefix)
    first = at
    texts: list[bytes] | None = None
    if keep_text:
        texts = record.text_raw if shape.content else record.reasoning_raw
        texts = [] if texts is None else texts
    for event in itertools.islice(events, at, None):
        if not event.startswith(prefix):
            break
        end = event.find(b'"', start)
        if end <= start or event[end - 1] == 0x5C or not event.startswith(head, end) or (
                lone_lf and event.find(b"\n", start, end) >= 0):
            break
        if tail is None:
            if len(event) - end != size:
                break
        else:
            found = tail.fullmatch(event, end + len(head))
            if found is None:
                break
            if group:
                meter(record, int(found[group]), now)
        if texts is not None:
            texts.append(event[start:end])
        at += 1
    shaped = at - first
    if shaped:
        record.token_ns.extend([now] * shaped)
        if not group:
            record.unmetered_chunks += shaped
        if shape.usage:
            record.usage_raw = events[at - 1][6:]
        if shape.content:
            record.content_chunks += shaped
            record.first_content_ns = record.first_content_ns or now
            if texts is not None:
                record.text_raw = texts
        else:
            record.reasoning_chunks += shaped
            if texts is not None:
                record.reasoning_raw = texts
    return at


def classify(record: RequestRecord, event: bytes, now: int, completions: bool,
             keep_text: bool) -> Shape | None:
    """Read one event into `record`; the shape it has when it is a simple one."""
    simple = event[:6] == b"data: " and b"\n" not in event
    payload = event[6:] if simple else data_of(event)
    if payload is None:
        return None
    if (payload[:1] != b"{" or payload[:8] == b'{"error"' or (
            payload[:9] == b'{"object"' and b'"error"' in payload[:24])
    ) and _not_an_answer(record, payload):  # [DONE] or an error: once per response
        return None
    matches = list(_KEYS.finditer(payload))
    content = reasoning = metered = False
    for match in matches:
        key = match[1]
        end = match.end()
        if key in _TEXT_KEYS:
            # a string value: the byte after its opening quote says if it is empty
            if payload[end : end + 1] != b'"' and (key != b"text" or completions):
                content = True
                if keep_text:
                    if record.text_raw is None:
                        record.text_raw = []
                    record.text_raw.append(json_string_body(payload, end))
        elif key in _REASONING_KEYS:
            if payload[end : end + 1] != b'"':
                if keep_text and not reasoning:  # a server may send both keys
                    if record.reasoning_raw is None:
                        record.reasoning_raw = []
                    record.reasoning_raw.append(json_string_body(payload, end))
                reasoning = True
        elif key == b"finish_reason":
            record.finish_reason = payload[end : payload.find(b'"', end)].decode("utf-8", "replace")
        elif key == _COMPLETION_TOKENS:  # a usage object's output tokens so far
            if match[2].isdigit():  # not a count ('"12"'): the usage check says so
                metered = True
                meter(record, int(match[2]), now)
        else:  # usage object
            record.usage_raw = payload
    if (content or reasoning) and not metered:
        record.unmetered_chunks += 1  # no per-chunk usage: ITL falls back to chunks
    if content:
        record.token_ns.append(now)
        record.content_chunks += 1
        if not record.first_content_ns:
            record.first_content_ns = now
    elif reasoning:
        record.token_ns.append(now)
        record.reasoning_chunks += 1
    return _shape(payload, matches, completions) if simple and (content or reasoning) else None


def _shape(payload: bytes, matches: list[re.Match[bytes]], completions: bool) -> Shape | None:
    """The shape of a simple event: one non-empty text string first, then at most a usage
    object and its count; the string without escapes or line ends; 24 bytes before it, so
    that the error checks above read the prefix only."""
    first = matches[0]
    key, start = first[1], first.end()
    content = key in _TEXT_KEYS and (key != b"text" or completions)
    if not (content or key in _REASONING_KEYS) or first[2] != b'"' or start < 24:
        return None
    end = payload.find(b'"', start)
    if end <= start or payload.find(b"\\", start, end) >= 0:
        return None
    count_at = -1
    for match in matches[1:]:
        if match[1] == _COMPLETION_TOKENS and match[2].isdigit() and count_at < 0:
            count_at = match.start(2) - end
        elif match[1] != b"usage" or match[2] != b"{":
            return None
    suffix = payload[end:]
    usage = len(matches) > 1
    digits = _DIGIT_RUNS.search(suffix)
    if digits is None:
        return Shape(b"data: " + payload[:start], suffix, len(suffix), None, 0, content, usage)
    head, rest = suffix[: digits.start()], suffix[digits.start() :]
    count_at -= len(head) if count_at >= 0 else 0
    parts = _DIGIT_RUNS.split(rest)  # "", digits, text, digits, ...: the digits at odd places
    offsets = list(itertools.accumulate(len(part) for part in parts))
    group = next((i // 2 + 1 for i in range(1, len(parts), 2) if offsets[i - 1] == count_at), 0)
    if count_at >= 0 and not group:
        return None
    text = b"".join(rb"(\d+)" if i % 2 else re.escape(part) for i, part in enumerate(parts))
    return Shape(b"data: " + payload[:start], head, -1, re.compile(text), group, content, usage)


def meter(record: RequestRecord, count: int, now: int) -> None:
    """A usage object's output tokens so far: with vLLM's `continuous_usage_stats` every
    chunk carries one, so a chunk whose count grew brought that many tokens, whatever its
    text (empty for a partial UTF-8 character held back, several tokens when the server
    merged steps). The last usage-only chunk adds none."""
    if count > record.metered_tokens:
        record.metered_tokens = count
        record.metered_ns.append(now)
        record.metered_counts.append(count)


def _not_an_answer(record: RequestRecord, payload: bytes) -> bool:
    """An event that is not a JSON object, or an error: True when the key scan skips it
    ([DONE], not JSON, an error); another JSON array goes on to the scan."""
    if payload[:1] == b"[":
        return payload.startswith(b"[DONE]")
    if payload[:1] != b"{":  # not a JSON object: not an answer
        record.fail("bad_response", f"an event that is not JSON: {mask_bytes(payload, 60)!r}")
        return True
    record.error_raw = payload
    return True


def whole_chunks(data: bytes, pos: int) -> tuple[bytes, int] | None:
    """The bytes of the whole chunks from `pos` on (at a chunk's size line) and where they
    end, when each is `size CRLF bytes CRLF` with its size right; None when the first pair
    is not, or a size is wrong or not plain hex: the byte loop reads those.
    Stops before the last chunk (size 0) and before a chunk not yet whole."""
    parts = (data[pos:] if pos else data).split(b"\r\n")
    pairs = (len(parts) - 1) // 2
    if pairs < 2:
        return None
    sizes, bodies = parts[0 : 2 * pairs : 2], parts[1 : 2 * pairs : 2]
    try:
        declared = list(map(int, sizes, _SIXTEEN))
    except ValueError:  # chunk extensions or garbage somewhere
        return None
    if 0 in declared:
        pairs = declared.index(0)
        del sizes[pairs:], bodies[pairs:], declared[pairs:]
    if not pairs or declared != list(map(len, bodies)):
        return None
    used = sum(map(len, sizes)) + sum(declared) + 4 * pairs
    return b"".join(bodies), pos + used
