"""Reading a file on the controller that anyone could have put there (a run folder's records,
a template, a log to diagnose): only a regular file is read. A FIFO would block the read
forever and a device (`/dev/zero`) never end it, so both are refused before a byte is read;
the file is opened without blocking and checked on the open descriptor, so it cannot be
swapped between the check and the read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """The path exists but is not a regular file; `strerror` says what it is."""


def kind_of(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def read_bytes(path: Path, *, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file `path`. OSError as open() raises it; NotRegularFile for
    anything else, and for a file over `max_bytes`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({kind_of(info.st_mode)})",
                                 str(path))
        if max_bytes is not None and info.st_size > max_bytes:
            raise NotRegularFile(errno.EFBIG, f"too large ({info.st_size:,} bytes, at most "
                                              f"{max_bytes:,})", str(path))
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def read_text(path: Path, *, max_bytes: int | None = None, errors: str = "strict") -> str:
    """The UTF-8 text of the regular file `path` (UnicodeDecodeError when it is not text,
    unless `errors` says otherwise)."""
    return read_bytes(path, max_bytes=max_bytes).decode("utf-8", errors)
