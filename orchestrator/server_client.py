"""One synchronous client for a served model's API (vLLM, the simulator, any OpenAI-compatible
server): health, models, version, a one-token chat, a streamed chat with reasoning.

Readiness, the smoke checks, `orch status` and the benchmark's look at the server before a
sweep all talk through it. The benchmark's own load generator is not here: its hot path is
a raw asyncio client with its own measured reasons (docs/bench.md).

Methods return what the server said; a server that cannot be reached raises
`ServerUnreachable` (the callers decide: still starting, an error, a status cell). Every
request ends within its timeout, counted from its start (http_deadline.py), and keeps a
bounded answer: MAX_ANSWER bytes of a plain answer; of a stream, lines of at most MAX_LINE
and MAX_TEXT characters of text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ServerUnreachable
from orchestrator.masking import mask

if TYPE_CHECKING:  # imported by the first client: ~0.1 s that `orch plan` and the like never need
    # httpx only once a server is asked (start-up time)
    import httpx

SIMULATOR_HEADER = "x-orch-simulator"
# /health, /v1/models, /version and a one-token chat answer in a few KB: a larger answer, or
# one that does not end within the request timeout, is a server misbehaving, not a slow one.
MAX_ANSWER = 1024 * 1024
MAX_LINE = 1024 * 1024  # an SSE line: a chunk of a streamed answer is a few hundred bytes
MAX_TEXT = 8 * 1024 * 1024  # a streamed answer's text (content and reasoning) kept

@dataclass(frozen=True)
class Models:
    status: int
    names: list[str]  # the served names (`id` of each card), in order
    simulator: str | None  # the simulator's header, when it is orch's simulator


@dataclass(frozen=True)
class Answers:
    """What `orch status` shows of the server."""

    health: str  # the status code of /health, or the reason there is none
    served: list[str]
    version: str | None


@dataclass
class ChatAnswer:
    """A streamed chat completion, read to the end."""

    status_code: int | None = None
    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    chunks: int = 0
    content_chunks: int = 0
    reasoning_chunks: int = 0
    done: bool = False  # saw `data: [DONE]`
    error: str | None = None  # transport error, HTTP error or an error event
    timed_out: bool = False
    ttft_s: float | None = None  # first chunk with choices


CHAT_ANSWERED = "a one-token chat completion answered "  # what ready() says of a refused chat


def chat_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


def error_message(text: str) -> str:
    """The message of an OpenAI-style error body (or the body itself, shortened), masked
    before it is cut (a server may repeat the API key)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return mask(text.strip())[:300] or "(empty body)"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and "message" in error:
        return mask(str(error["message"]))
    if isinstance(error, str):
        return mask(error)
    return mask(text.strip())[:300]


class ServerClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> None:
        # httpx only once a server is asked (start-up time)
        from orchestrator import http_deadline

        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http: httpx.Client = http_deadline.client(timeout)
        self._timeout = timeout

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One whole answer, read within the timeout and MAX_ANSWER bytes (a trickle or a
        body without end is cut there and said, never waited on)."""
        # httpx only once a server is asked (start-up time)
        import httpx

        from orchestrator.http_deadline import Deadline

        url = f"{self.base_url}{path}"
        deadline, answered = Deadline(self._timeout), False
        try:
            with deadline, self._http.stream(method, url, headers=self.headers,
                                             extensions=deadline.extensions, **kwargs) as answer:
                answered = True
                body = bytearray()
                for piece in answer.iter_bytes():
                    body += piece
                    if len(body) > MAX_ANSWER:
                        raise self._misbehaved(url, f"answered more than {MAX_ANSWER:,} bytes")
                # The body is decoded already: its framing headers would decode it again.
                headers = [(k, v) for k, v in answer.headers.multi_items()
                           if k.lower() not in ("content-encoding", "content-length",
                                                "transfer-encoding")]
                return httpx.Response(answer.status_code, headers=headers,
                                      content=bytes(body), request=answer.request)
        except httpx.HTTPError as error:
            if deadline.expired and answered:  # a trickle: a timeout of a server that talks
                raise self._misbehaved(
                    url, f"did not finish its answer within {self._timeout:g} s") from None
            raise ServerUnreachable(mask(f"cannot reach {url}: {type(error).__name__}: {error}"),
                                    reason=type(error).__name__) from None

    @staticmethod
    def _misbehaved(url: str, what: str) -> ServerUnreachable:
        return ServerUnreachable(mask(f"{url} {what}"), reason=mask(f"{url} {what}"))

    # -- the endpoints ------------------------------------------------------------------

    def health(self) -> int:
        return self._request("GET", "/health").status_code

    def models(self) -> Models:
        answer = self._request("GET", "/v1/models")
        names: list[str] = []
        if answer.status_code == 200:
            try:
                names = [str(card["id"]) for card in answer.json().get("data", [])]
            except (ValueError, AttributeError, KeyError, TypeError):
                names = []
        return Models(answer.status_code, names, answer.headers.get(SIMULATOR_HEADER))

    def version(self) -> dict[str, Any]:
        """`/version`'s JSON object (`{"version": "0.17.1"}`), or {} without one."""
        try:
            answer = self._request("GET", "/version")
            data = answer.json() if answer.status_code == 200 else {}
        except (ServerUnreachable, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def one_token_chat(self, model: str) -> httpx.Response:
        return self._request("POST", "/v1/chat/completions", json={
            "model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
        })

    # -- what the callers ask -----------------------------------------------------------

    def ready(self, model: str) -> tuple[bool, str]:
        """(ready, what is missing). vLLM can look healthy before it can serve: ready means
        /health 200, /v1/models lists `model`, and a one-token chat answers."""
        try:
            health = self.health()
            if health != 200:
                return False, f"/health answered {health}"
            models = self.models()
            if model not in models.names:
                return False, (f"/v1/models does not list {model!r} yet "
                               f"({models.status}: {models.names})")
            chat = self.one_token_chat(model)
            if chat.status_code != 200:
                return False, f"{CHAT_ANSWERED}{chat.status_code}: {error_message(chat.text)[:300]}"
            return True, "ready"
        except ServerUnreachable as error:
            return False, error.reason

    def describe(self) -> Answers:
        try:
            health = str(self.health())
            models = self.models()
        except ServerUnreachable as error:
            return Answers(health=error.reason, served=[], version=None)
        version = self.version().get("version")
        return Answers(health, models.names, str(version) if version is not None else None)

    def stream_chat(self, body: dict[str, Any], *, timeout: float) -> ChatAnswer:
        """POST a streamed chat completion and read it all: content and reasoning (from
        `delta.reasoning`, or the older `delta.reasoning_content`), usage, finish reason.
        Never raises: a failure is the answer's `error`."""
        # httpx only once a server is asked (start-up time)
        import httpx

        from orchestrator.http_deadline import Deadline

        out = ChatAnswer()
        content: list[str] = []
        reasoning: list[str] = []
        started, size = time.monotonic(), 0
        try:
            with Deadline(timeout) as deadline, self._http.stream(
                    "POST", chat_url(self.base_url), json=body, headers=self.headers,
                    timeout=timeout, extensions=deadline.extensions) as http:
                out.status_code = http.status_code
                if http.status_code != 200:
                    out.error = f"HTTP {http.status_code}: {error_message(_start_of(http))}"
                    return out
                for line in _lines(http, out):
                    if not line.startswith("data:"):
                        continue  # blank separators, `:` comments, `event:` lines
                    data = line[5:].strip()
                    if data == "[DONE]":
                        out.done = True
                        break
                    size += _take_chunk(out, data, started, content, reasoning)
                    if size > MAX_TEXT:
                        out.error = (f"its text passed {MAX_TEXT:,} characters (read no "
                                     f"further; the first {MAX_TEXT:,} kept)")
                        break
        except httpx.TimeoutException:
            out.error, out.timed_out = f"no complete answer within {timeout:g} s", True
        except httpx.HTTPError as error:
            out.error = mask(f"request failed: {type(error).__name__}: {error}")
        out.content = "".join(content)[:MAX_TEXT]
        out.reasoning = "".join(reasoning)[: MAX_TEXT - len(out.content)]
        if out.error is None and not out.done:
            out.error = "the stream ended without `data: [DONE]` (did the server die mid-answer?)"
        return out


def _start_of(http: httpx.Response) -> str:
    """The first MAX_ANSWER bytes of an answer, as text (an error's body: its message)."""
    kept = bytearray()
    for piece in http.iter_bytes():
        kept += piece[: MAX_ANSWER - len(kept)]
        if len(kept) >= MAX_ANSWER:
            break
    return kept.decode("utf-8", "replace")


def _lines(http: httpx.Response, out: ChatAnswer) -> Iterator[str]:
    """The lines of an event stream; a line longer than MAX_LINE ends it with an error."""
    pending = b""
    for piece in http.iter_bytes():
        lines = (pending + piece).splitlines(keepends=True)
        pending = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
        if len(pending) > MAX_LINE:
            out.error = f"a line of the stream is longer than {MAX_LINE >> 20} MiB (read no further)"
            return
        yield from (line.rstrip(b"\r\n").decode("utf-8", "replace") for line in lines)
    if pending:
        yield pending.decode("utf-8", "replace")


def _take_chunk(
    out: ChatAnswer, data: str, started: float, content: list[str], reasoning: list[str]
) -> int:
    """Reads one event into `out`; the characters of text it added."""
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError:
        out.error = out.error or f"a stream event is not JSON: {mask(data)[:120]!r}"
        return 0
    if not isinstance(chunk, dict):
        return 0
    out.chunks += 1
    if "error" in chunk:
        out.error = f"error event in the stream: {error_message(json.dumps(chunk))}"
        return 0
    if isinstance(chunk.get("usage"), dict):
        out.usage = chunk["usage"]
    added = 0
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        if out.ttft_s is None:
            out.ttft_s = round(time.monotonic() - started, 4)
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        think = delta.get("reasoning") or delta.get("reasoning_content")
        if isinstance(think, str) and think:
            reasoning.append(think)
            out.reasoning_chunks += 1
            added += len(think)
        if isinstance(text := delta.get("content"), str) and text:
            content.append(text)
            out.content_chunks += 1
            added += len(text)
        if choice.get("finish_reason"):
            out.finish_reason = choice["finish_reason"]
    return added
