"""Files the plan puts on the host: exists, sha256 and mode, what it is when not a regular
file, and its content when it differs from the desired digest (small text: for diffs)."""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any, Dict, List

from orchestrator.facts.fact import Fact

# == host side: shipped to the host (stdlib only, Python 3.8) ==

MAX_DIFF_BYTES = 256 * 1024


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


def file_facts(files: List[Dict[str, str]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for spec in files:
        path = spec["path"]
        try:
            # O_NONBLOCK: a FIFO must not block the probe; only a regular file is read.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    out[path] = {"exists": True, "kind": _kind(info.st_mode)}
                    continue
                with os.fdopen(os.dup(fd), "rb") as handle:
                    data = handle.read()
            finally:
                os.close(fd)
            mode = "0" + oct(info.st_mode & 0o7777)[2:].rjust(3, "0")
        except FileNotFoundError:
            out[path] = {"exists": False}
            continue
        except OSError as error:
            out[path] = {"exists": False, "error": str(error)}
            continue
        digest = hashlib.sha256(data).hexdigest()
        entry: Dict[str, Any] = {"exists": True, "sha256": digest, "mode": mode}
        if digest != spec.get("sha256") and len(data) <= MAX_DIFF_BYTES:
            try:
                entry["content"] = data.decode("utf-8")
            except UnicodeDecodeError:
                entry["binary"] = True
        out[path] = entry
    return out


def gather_files(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["files"]`: [{"path", "sha256" (desired, or None)}]."""
    if request.get("files"):
        answer["files"] = file_facts(request["files"])


# == controller side ==


@dataclass(frozen=True)
class FileFacts:
    exists: bool
    sha256: str | None = None
    mode: str | None = None
    content: str | None = None  # only when it differs from the desired digest and is small text
    error: str | None = None
    kind: str | None = None  # what it is when it exists but is not a regular file ("FIFO")


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    return {"files": {path: FileFacts(
        exists=bool(entry.get("exists")),
        sha256=entry.get("sha256"),
        mode=entry.get("mode"),
        content=entry.get("content"),
        error=entry.get("error"),
        kind=entry.get("kind"),
    ) for path, entry in (answer.get("files") or {}).items()}}


FACT = Fact(gather="gather_files", parse=parse)
