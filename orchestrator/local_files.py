"""Files on the controller: reading one that anyone could have put there, and writing a
record a later command reads.

Reading (a run folder's records, a template, a log to diagnose): only a regular file is read.
A FIFO would block the read forever and a device (`/dev/zero`) never end it, so both are
refused before a byte is read; the file is opened without blocking and checked on the open
descriptor, so it cannot be swapped between the check and the read.

Writing (`write_atomic`): every record a later command reads (a run folder's files, a matrix
run's matrix.json, a report, plots, a schema) is written to a temporary file in the same
folder, flushed to the disk, then renamed over the old one: a full disk, a crash or Ctrl-C
leaves the old file whole or the new one whole, never half of one. A path that is not a
regular file (`-o /dev/full`, a FIFO) is refused: the rename would replace the device itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from collections.abc import Sequence
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


def not_a_file(path: str | Path) -> str | None:
    """Why `path` (after links) is not a regular file to read ("does not exist", "is a FIFO,
    not a regular file"), or None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "does not exist"
    return None if stat.S_ISREG(mode) else f"is {kind_of(mode)}, not a regular file"


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


def write_atomic(path: Path, data: bytes | str, *, durable: bool = True) -> None:
    """Replace `path` with `data` whole: a temporary file beside it (same file system, so the
    rename is atomic; a unique name, so two writers never share one), then os.replace. With
    `durable`, the data and the rename reach the disk before this returns (fsync of the file,
    then of its folder): after a power loss the record is the old one or the new one, not
    an empty file. OSError as the write raised it, with no temporary file left behind."""
    _refuse_special(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            umask = os.umask(0o022)
            os.umask(umask)
            os.fchmod(handle.fileno(), 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
            if durable:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable:
        _sync_folder(path.parent)


def _refuse_special(path: Path) -> None:
    """NotRegularFile when `path` (after links: `/dev/stdout`) is a device, a FIFO or a
    folder: the rename would put a file in place of `/dev/full` or `/dev/null` (as root,
    for every program after), and a write to it never lands anywhere a record can be read."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(errno.EINVAL, f"not a regular file ({kind_of(info.st_mode)})",
                             str(path))


def _sync_folder(folder: Path) -> None:
    # The rename is an entry of the folder; some file systems cannot fsync a folder.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def sync_files(paths: Sequence[Path]) -> None:
    """Bring files written with `write_atomic(durable=False)` to the disk: each file, then each
    folder (their renames), many at once. A journaling file system commits concurrent fsyncs
    together: 256 files in ~20 ms here, against ~0.8 s one after another. OSError: the first
    file that could not be synced."""
    files = list(dict.fromkeys(paths))
    folders = list(dict.fromkeys(path.parent for path in files))
    failed: list[OSError] = []

    def sync(items: list[Path], folder: bool) -> None:
        for item in items:
            try:
                if folder:
                    _sync_folder(item)
                    continue
                fd = os.open(item, os.O_RDONLY)  # a file gone since: nothing to sync
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except FileNotFoundError:
                continue
            except OSError as error:
                failed.append(error)

    for items, folder in ((files, False), (folders, True)):
        lanes = min(_SYNC_LANES, len(items))
        threads = [threading.Thread(target=sync, args=(items[lane::lanes], folder))
                   for lane in range(lanes)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failed:
        raise failed[0]


_SYNC_LANES = 16  # fsyncs at once
