"""A file's bytes from the stand-in hub: whole (200), a byte range (206, for a resumed download)
or an unsatisfiable range (416); the one-shot cut of hub_store.cut_download, which sends
part of the body and closes the connection, as a network failure mid-download would; and
hub_store.pace, a slow link."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from orchestrator.sim.hub_store import HubStore

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
_CHUNK = 1 << 20


def byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(first, last) inclusive for a satisfiable single range, None to send the whole file
    (no header, or one this server ignores: several ranges, a malformed one), "unsatisfiable"."""
    match = _RANGE.fullmatch((header or "").replace(" ", ""))
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":  # bytes=-N: the last N bytes
        length = int(last)
        return (max(size - length, 0), size - 1) if length and size else "unsatisfiable"
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or (last and int(last) < start):
        return "unsatisfiable"
    return start, end


def send_file(handler: BaseHTTPRequestHandler, store: HubStore, sha256: str, size: int,
              headers: dict[str, str], head: bool,
              cut_known: Callable[[int | None], None] = lambda cut: None) -> None:
    """Answer with the blob's bytes as the request's Range asks. `cut_known` hears, before
    the headers go out, the bytes to be sent before an armed cut_download fault closes the
    connection (None: no cut)."""
    wanted = byte_range(handler.headers.get("Range"), size)
    if wanted == "unsatisfiable":
        handler.send_response(416)
        for name, value in {**headers, "Content-Range": f"bytes */{size}",
                            "Content-Length": "0"}.items():
            handler.send_header(name, value)
        handler.end_headers()
        return None
    status, (start, end) = (206, wanted) if isinstance(wanted, tuple) else (200, (0, size - 1))
    length = end - start + 1
    cut, pace = (None, 0.0) if head else (store.take_cut(sha256), store.current_pace())
    send = length if cut is None else min(cut, length)
    cut_known(None if cut is None else send)
    handler.send_response(status)
    headers = {"Content-Type": "application/octet-stream", **headers,
               "Content-Length": str(length)}
    if status == 206:
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    if head:
        return
    with store.blob_path(sha256).open("rb") as blob:
        blob.seek(start)
        remaining = send
        while remaining > 0:
            chunk = blob.read(min(_CHUNK, remaining))
            if not chunk:
                break
            handler.wfile.write(chunk)
            remaining -= len(chunk)
            if pace:
                time.sleep(len(chunk) / pace)
    if cut is not None:
        handler.wfile.flush()
        handler.close_connection = True  # the body ends short: the client sees the peer close
