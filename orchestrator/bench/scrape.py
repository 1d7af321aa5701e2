"""One bounded GET of a metrics page (the server's `/metrics`, a DCGM exporter's): whatever
the server does, a scrape ends, costs bounded memory, and what was wrong comes back as words,
never as an exception.

Bounds: the answer must start within `timeout_s` and is read for at most `timeout_s` more
(a server that trickles bytes is cut there); the whole request, its header block included,
ends `2 * timeout_s` after it began (http_deadline.py: a header block sent a byte at a time
is cut there too); at most MAX_BYTES of body and MAX_LINE per line are read. Only the lines that start with one of `wanted` are kept, so memory holds what is
parsed, not the page. A body cut by a bound is dropped whole: a page read in part could lack
the counters its deltas need, and nothing is counted from a page that was not whole.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx

from orchestrator.http_deadline import Deadline

MAX_BYTES = 16 * 1024 * 1024  # vLLM's page with every histogram is well under 1 MiB
MAX_LINE = 64 * 1024
# How a page of Prometheus text starts: a comment, or a metric name and a label set or value.
_PROMETHEUS = re.compile(r"#|[a-zA-Z_:][a-zA-Z0-9_:]*(\{|\s)")


@dataclass(frozen=True)
class Page:
    """The kept lines of one scrape, or why there are none (`problem`)."""

    lines: list[str] = field(default_factory=list)
    problem: str = ""
    timed_out: bool = False
    nobody: bool = False  # nothing there to answer: refused, or closed before a word


def fetch(client: httpx.Client, url: str, wanted: tuple[str, ...], timeout_s: float) -> Page:
    """GET `url` with `client` (made by http_deadline.client); the lines that start with one
    of `wanted`, or the problem."""
    deadline = Deadline(2 * timeout_s)
    try:
        with deadline, client.stream("GET", url, timeout=timeout_s,
                                     extensions=deadline.extensions) as response:
            if response.status_code != 200:
                return Page(problem=f"HTTP {response.status_code} {response.reason_phrase}".rstrip())
            kind = response.headers.get("content-type", "").split(";")[0].strip()
            if kind == "text/html":
                return Page(problem="it answered an HTML page, not Prometheus text")
            try:
                return _read(response.iter_bytes(), wanted, time.monotonic() + timeout_s, timeout_s)
            except httpx.TransportError as error:
                return Page(problem=f"its answer broke off ({_words(error) or type(error).__name__})")
    except httpx.TimeoutException:
        if deadline.expired:
            return Page(problem=f"no whole answer within {2 * timeout_s:g} s (read no further)",
                        timed_out=True)
        return Page(problem=f"no answer within {timeout_s:g} s", timed_out=True)
    except httpx.ConnectError as error:
        return Page(problem=f"nothing answered ({_words(error) or 'connection refused'})", nobody=True)
    except httpx.ReadError as error:  # reset before a word (an SSH forward to no listener)
        return Page(problem=f"the connection ended before an answer ({_words(error)})", nobody=True)
    except httpx.RemoteProtocolError as error:
        if "without sending a response" in str(error):  # closed at once, or a forward to nothing
            return Page(problem="it closed the connection without answering", nobody=True)
        return Page(problem=f"it does not speak HTTP ({_words(error)})")
    except httpx.HTTPError as error:
        return Page(problem=_words(error) or type(error).__name__)


def _words(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else ""


def _read(chunks: Iterable[bytes], wanted: tuple[str, ...], end: float,
          timeout_s: float) -> Page:
    kept: list[str] = []
    buffer, total, first = b"", 0, [True]
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_BYTES:
            return Page(problem=f"an answer longer than {MAX_BYTES >> 20} MiB (read no further)")
        if time.monotonic() > end:
            return Page(problem=f"the answer did not end within {timeout_s:g} s", timed_out=True)
        buffer += chunk
        *whole, buffer = buffer.split(b"\n")
        if len(buffer) > MAX_LINE:
            return Page(problem=f"a line longer than {MAX_LINE >> 10} KiB (read no further)")
        for raw in whole:
            problem = _keep(raw, wanted, kept, first)
            if problem:
                return Page(problem=problem)
    problem = _keep(buffer, wanted, kept, first) if buffer else ""
    return Page(problem=problem) if problem else Page(kept)


def _keep(raw: bytes, wanted: tuple[str, ...], kept: list[str], first: list[bool]) -> str:
    """Keeps the line if wanted; what is wrong with it when it is not text, or when it is
    the page's first and that is not Prometheus text (`first`: none seen yet)."""
    try:
        line = raw.decode()
    except UnicodeDecodeError:
        return "its answer is not text (bytes that are not UTF-8)"
    if "\x00" in line:
        return "its answer is not text (NUL bytes)"
    if first[0] and line.strip():
        first[0] = False
        if not _PROMETHEUS.match(line.strip()):
            shown = line.strip()[:60]
            return f"its answer is not Prometheus text (it begins {shown!r})"
    if line.startswith(wanted):
        kept.append(line.rstrip("\r"))
    return ""
