"""One request's raw measurements, and the per-request metrics derived from them.

The streaming client fills a `RequestRecord` on the hot path with integers only
(`time.perf_counter_ns()` stamps taken when bytes arrive). Everything that costs more,
such as parsing the usage chunk or an error event, happens in `finish()` after the
response is over, and the metrics (`RequestMetrics`) are derived later by pure code.

Definitions (written into every result file as well):
- TTFT: request start to the first chunk that brought a token. A server that streams usage
  in every chunk (vLLM with `stream_options.continuous_usage_stats`, which orch asks for)
  says how many tokens each chunk brought, whatever its text; otherwise the first chunk
  with reasoning or content text.
- TTFT (content): request start to the first content chunk (what `vllm bench serve` calls
  TTFT on a reasoning model, since it ignores reasoning deltas).
- ITL: per output token, as vLLM's `vllm:inter_token_latency_seconds` histogram counts it
  (one gap per token after the first): with per-chunk usage, a chunk that brought n tokens
  adds n gaps of its gap / n (a chunk with empty text, a partial UTF-8 character the
  detokenizer holds back, is a token and a gap; a chunk carrying several tokens spreads its
  gap over them); without it, every gap between consecutive token-bearing chunks.
- TPOT: (E2EL - TTFT) / (output tokens - 1), output tokens including reasoning.
- E2EL: request start to the end of the response body.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.masking import mask, mask_bytes
from orchestrator.metrics import LATENCIES, Metric

# written into every level file: the latencies' own (orchestrator/metrics.py), then the
# counts and clocks they rest on
METRIC_DEFINITIONS: dict[str, str] = {
    **{m.name: m.definition for m in LATENCIES},
    "output_tokens": "usage.completion_tokens when the server sent usage, else the output "
                     "text re-encoded by --tokenizer when given, else token-bearing chunks counted",
    "input_len": "the asked prompt length of synthetic prompts, their unique prefix included "
                 "(exact with --tokenizer, else about one token per word); mean_input_tokens is "
                 "the server's usage.prompt_tokens, which on chat adds the chat template's tokens",
    "timestamps": "time.perf_counter_ns() when the bytes arrive, before any JSON parsing",
}


MAX_TOKENS = 100_000_000  # more tokens than any context holds: not a count


@dataclass(slots=True, eq=False)
class RequestRecord:
    """Raw facts of one request. Times are perf_counter nanoseconds (0 = never)."""

    request_id: str  # a UUID: llama.cpp's server answers 400 to any other x-request-id
    warmup: bool = False
    label: str = ""  # where it belongs: `<level>-<repeat>` (or `<level>-w`, warm-up)
    index: int = 0  # its place in that phase
    client_process: int | None = None  # which client process sent it, when several did
    retried: bool = False  # resent once: a reused keep-alive connection was closed
    reason: str = ""  # the status line's reason phrase (`Bad Request`)
    scheduled_ns: int = 0  # open loop: when the request was due to start
    start_ns: int = 0
    headers_ns: int = 0
    end_ns: int = 0
    status: int = 0
    token_ns: list[int] = field(default_factory=list)  # chunks with reasoning or content text
    # per-chunk usage (vLLM's continuous_usage_stats): each chunk whose running output token
    # count grew, its stamp and the count then; and the text chunks that came without one
    metered_ns: list[int] = field(default_factory=list)
    metered_counts: list[int] = field(default_factory=list)
    metered_tokens: int = 0
    unmetered_chunks: int = 0
    reasoning_chunks: int = 0
    content_chunks: int = 0
    first_content_ns: int = 0
    finish_reason: str | None = None
    usage_raw: bytes | None = None
    error_raw: bytes | None = None
    body_raw: bytes | None = None  # non-SSE body (error responses), capped
    # with --tokenizer: each chunk's text as it stood in the JSON (escaped), by kind
    text_raw: list[bytes] | None = None
    reasoning_raw: list[bytes] | None = None
    error_kind: str | None = None
    error_message: str | None = None
    event_stream: bool = False  # the answer said Content-Type: text/event-stream
    # filled by finish()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    # filled by tokens.TokenCounter when the server sent no usage
    tokenized_tokens: int | None = None  # reasoning included, as completion_tokens
    tokenized_reasoning_tokens: int | None = None
    tokenized_prompt_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def fail(self, kind: str, message: str) -> None:
        """Record the first failure only: later ones are consequences of it. What a server
        said is masked here, where it is recorded (a server may repeat the API key)."""
        if self.error_kind is None:
            self.error_kind = kind
            self.error_message = mask(message)

    def _usage(self, usage: dict[str, Any]) -> None:
        """The server's counts, when they are counts: a negative or absurd one fails the
        request rather than turning the level's throughput negative."""
        details = usage.get("completion_tokens_details")
        found = {"prompt_tokens": usage.get("prompt_tokens"),
                 "completion_tokens": usage.get("completion_tokens"),
                 "reasoning_tokens": details.get("reasoning_tokens")
                 if isinstance(details, dict) else None}
        for name, value in found.items():
            count = _int_or_none(value)
            if value is not None and (count is None or not 0 <= count <= MAX_TOKENS):
                self.fail("bad_response", f"usage.{name} is {value!r}: not a token count")
                return
        self.prompt_tokens = _int_or_none(found["prompt_tokens"])
        self.completion_tokens = _int_or_none(found["completion_tokens"])
        self.usage_reasoning_tokens = _int_or_none(found["reasoning_tokens"])

    def finish(self) -> None:
        """Parse what the hot path kept as raw bytes (usage, error event, error body)."""
        if self.usage_raw is not None:
            usage = _json_object(self.usage_raw).get("usage")
            if isinstance(usage, dict):
                self._usage(usage)
        if self.status == 200 and not self.event_stream:
            begins = mask_bytes(self.body_raw or b"", 60)
            self.fail("bad_response", "the answer is not an event stream (text/event-stream); "
                                      f"it begins {begins!r}")
        elif (self.status == 200 and not self.token_ns and self.usage_raw is None
              and self.finish_reason is None and self.error_raw is None):
            self.fail("bad_response", "the stream held no completion (no token, no usage, no "
                                      "finish_reason)")
        if self.error_raw is not None:
            payload = _json_object(self.error_raw)
            error = payload.get("error", payload)
            kind, message = "stream_error", mask(self.error_raw.decode("utf-8", "replace"))[:500]
            if isinstance(error, dict):
                kind = f"stream_error:{error.get('type') or 'unknown'}"
                message = mask(str(error.get("message", message)))[:500]
            self.fail(kind, message)
        if self.status and self.status != 200:
            text = (self.body_raw or b"").decode("utf-8", "replace")
            payload = _json_object(self.body_raw or b"")
            error = payload.get("error")
            if isinstance(error, dict) and "message" in error:
                text = str(error["message"])
            elif isinstance(error, str):
                text = error
            status = f"HTTP {self.status}" + (f" {self.reason}" if self.reason else "")
            excerpt = " ".join(mask(text).split())[:300]  # masked before it is cut
            self.fail(f"http_{self.status}", f"{status}: {excerpt}" if excerpt else
                      f"{status} (empty body)")
        if self.finish_reason == "error":
            self.fail("finish_error", "the server ended the request with finish_reason=error")


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """Per-request figures in milliseconds and tokens, derived from a record."""

    ok: bool
    start_s: float  # relative to the level's origin
    end_s: float
    ttft_ms: float | None
    ttft_content_ms: float | None
    e2el_ms: float | None
    tpot_ms: float | None
    itls_ms: tuple[float, ...]
    output_tokens: int
    token_source: str  # "usage", "tokenizer" or "counted"
    itl_source: str  # "usage": per token, from per-chunk usage; "chunks": per token-bearing chunk
    reasoning_tokens: int
    content_tokens: int
    input_tokens: int | None
    finish_reason: str | None
    error_kind: str | None
    scheduled_s: float | None = None
    error: str | None = None  # the failure's message (status, reason, body excerpt)
    retried: bool = False

    def value(self, metric: Metric) -> float | None:
        """This request's figure of a per-request latency (`ttft_ms`, ...; the field is the
        metric's name)."""
        value = getattr(self, f"{metric.name}_ms")
        return value if isinstance(value, float | int) else None

    def samples(self, metric: Metric) -> tuple[float, ...]:
        """What this request adds to the level's samples of a latency: its one value, none,
        or, for a per-token latency (ITL), one per token gap."""
        if metric.per_token:
            return self.itls_ms
        value = self.value(metric)
        return () if value is None else (value,)


def metered(record: RequestRecord) -> bool:
    """Whether every token-bearing chunk said how many tokens it brought (per-chunk usage):
    a server that sends usage only at the end has text chunks without one."""
    return bool(record.metered_ns) and record.unmetered_chunks == 0


def token_gaps_ms(stamps_ns: Sequence[int], counts: Sequence[int]) -> list[float]:
    """Per-token gaps from chunks with running token counts: chunk k brought
    counts[k] - counts[k-1] tokens and adds that many gaps of its gap / that number. The
    tokens of the first chunk beyond one add none: they came before the client could see
    a gap (vLLM's histogram has them; they are inside the client's TTFT)."""
    gaps: list[float] = []
    for k in range(1, len(stamps_ns)):
        n = counts[k] - counts[k - 1]
        if n > 0:
            gaps.extend([(stamps_ns[k] - stamps_ns[k - 1]) * 1e-6 / n] * n)
    return gaps


def token_times_ns(record: RequestRecord) -> list[int]:
    """When each output token arrived (a chunk of n tokens counts n times at its stamp):
    the busiest second's count."""
    if not metered(record):
        return record.token_ns
    out: list[int] = []
    previous = 0
    for stamp, count in zip(record.metered_ns, record.metered_counts, strict=True):
        out.extend([stamp] * (count - previous))
        previous = count
    return out


def _token_counts(record: RequestRecord) -> tuple[int, str, int]:
    """Its output tokens, where that count comes from (the server's usage, the tokenizer,
    counted chunks) and how many of them are reasoning."""
    if record.completion_tokens is not None:
        output, source = record.completion_tokens, "usage"
    elif record.tokenized_tokens is not None:
        output, source = record.tokenized_tokens, "tokenizer"
    else:
        output, source = len(record.token_ns), "counted"
    if record.usage_reasoning_tokens is not None:
        reasoning = record.usage_reasoning_tokens
    elif source == "tokenizer" and record.tokenized_reasoning_tokens is not None:
        reasoning = record.tokenized_reasoning_tokens
    else:
        reasoning = min(record.reasoning_chunks, output)
    return output, source, reasoning


def derive(record: RequestRecord, origin_ns: int) -> RequestMetrics:
    """Metrics of one record; times relative to `origin_ns` (the level's start)."""
    ns_ms = 1e-6
    tokens = record.token_ns
    output, source, reasoning = _token_counts(record)
    per_token = metered(record)
    first_ns = record.metered_ns[0] if per_token else (tokens[0] if tokens else 0)
    ttft = (first_ns - record.start_ns) * ns_ms if first_ns else None
    ttft_content = (
        (record.first_content_ns - record.start_ns) * ns_ms if record.first_content_ns else None
    )
    e2el = (record.end_ns - record.start_ns) * ns_ms if record.end_ns else None
    tpot = None
    if ttft is not None and e2el is not None and output > 1:
        tpot = (e2el - ttft) / (output - 1)
    if per_token:
        itls = tuple(token_gaps_ms(record.metered_ns, record.metered_counts))
    else:
        itls = tuple((b - a) * ns_ms for a, b in itertools.pairwise(tokens))
    return RequestMetrics(
        ok=record.ok,
        start_s=(record.start_ns - origin_ns) / 1e9,
        end_s=((record.end_ns or record.start_ns) - origin_ns) / 1e9,
        ttft_ms=ttft,
        ttft_content_ms=ttft_content,
        e2el_ms=e2el,
        tpot_ms=tpot,
        itls_ms=itls,
        output_tokens=output,
        token_source=source,
        itl_source="usage" if per_token else "chunks",
        reasoning_tokens=reasoning,
        content_tokens=max(0, output - reasoning),
        input_tokens=record.prompt_tokens if record.prompt_tokens is not None
        else record.tokenized_prompt_tokens,
        finish_reason=record.finish_reason,
        error_kind=record.error_kind,
        scheduled_s=(record.scheduled_ns - origin_ns) / 1e9 if record.scheduled_ns else None,
        error=record.error_message,
        retried=record.retried,
    )


def jsonl_row(record: RequestRecord, metrics: RequestMetrics, level: str) -> dict[str, Any]:
    """One line of requests-<level>.jsonl: the derived figures plus the raw counters."""
    return {
        "level": level,
        "phase": record.label,
        "index": record.index,
        "request_id": record.request_id,
        "warmup": record.warmup,
        "retried": record.retried,
        "ok": metrics.ok,
        "status": record.status,
        "error_kind": record.error_kind,
        "error": record.error_message,
        "scheduled_s": _round(metrics.scheduled_s),
        "start_s": _round(metrics.start_s),
        "end_s": _round(metrics.end_s),
        **{f"{m.name}_ms": _round(metrics.value(m)) for m in LATENCIES if not m.per_token},
        "input_tokens": metrics.input_tokens,
        "output_tokens": metrics.output_tokens,
        "token_source": metrics.token_source,
        "counted_chunks": len(record.token_ns),
        "metered_chunks": len(record.metered_ns),
        "itl_source": metrics.itl_source,
        "reasoning_tokens": metrics.reasoning_tokens,
        "content_tokens": metrics.content_tokens,
        "finish_reason": metrics.finish_reason,
        "itls_ms": [round(x, 3) for x in metrics.itls_ms],
        **({"client_process": record.client_process} if record.client_process is not None else {}),
    }


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)
