"""What orch takes from a model hub, and from the model's folder on the host: nothing it has not
checked. A hub's listing names files, a commit and sizes, and its answers an ETag; each of them
becomes a path or a byte count on the host, so each is held to a shape here (a relative name
without `..`, a commit of 40 hex digits, a size of 0 to 100 TB). The folders orch writes in
must be the running user's own and writable by nobody else, and a link in them is never
followed out of the folder. One home for these rules: the fact program and the fetch program
(steps/model_fetch_host.py) ship this host side, and the controller checks the facts with it.
"""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Any, List, Optional

# == host side: shipped to the host (stdlib only, Python 3.8) ==

MODEL_MAX_FILE_SIZE = 100 * 10 ** 12  # 100 TB: beyond any file a hub serves
# Files in one model's listing: a real model has tens (Kimi-K2.5 about 70 shards); a listing
# of 300,000 cost `orch plan` 390 MiB and 5.5 s.
MODEL_MAX_FILES = 10_000


def model_shown(value: Any) -> str:
    """A hub's value in a message: quoted, every control and non-ASCII character escaped."""
    return json.dumps(value if isinstance(value, str) else repr(value))[:300]


def model_is_hex(value: Any, *lengths: int) -> bool:
    return isinstance(value, str) and len(value) in lengths and \
        all(c in "0123456789abcdef" for c in value)


def model_name_problem(name: Any) -> Optional[str]:
    """Why a listed file name cannot be a path inside the model's folder (None: it can)."""
    if not isinstance(name, str) or not name:
        return "not a file name"
    if name.startswith("/"):
        return "an absolute path"
    if "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "a backslash, NUL or control character in it"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "an empty, '.' or '..' segment in it"
    if name == ".cache/orch" or name.startswith(".cache/orch/"):
        return "orch's own records are there"
    return None


def model_size_problem(size: Any) -> Optional[str]:
    if type(size) is not int:
        return f"its size {model_shown(size)} is not a whole number"
    if size < 0 or size > MODEL_MAX_FILE_SIZE:
        return f"its size {size} bytes is not between 0 and 100 TB"
    return None


def model_entry_problem(entry: Any) -> Optional[str]:
    if not isinstance(entry, dict):
        return f"an entry that is not a file: {model_shown(entry)}"
    name = entry.get("path")
    problem = model_name_problem(name) or model_size_problem(entry.get("size"))
    if problem is None and entry.get("sha256") is not None and \
            not model_is_hex(entry.get("sha256"), 64):
        problem = "its sha256 {} is not 64 hex digits".format(model_shown(entry.get("sha256")))
    if problem is None and entry.get("blob") is not None and not model_is_hex(entry.get("blob"), 40):
        problem = "its git blob id {} is not 40 hex digits".format(model_shown(entry.get("blob")))
    return None if problem is None else f"file {model_shown(name)}: {problem}"


def model_files_problem(files: Any) -> Optional[str]:
    """The first reason a file list (the hub's, or a record's) cannot be used as it stands."""
    if not isinstance(files, list):
        return "the file list is not a list"
    if len(files) > MODEL_MAX_FILES:
        return (f"the listing holds {len(files)} files, more than orch takes from one model "
                f"({MODEL_MAX_FILES})")
    for entry in files:
        problem = model_entry_problem(entry)
        if problem is not None:
            return problem
    return None


def model_commit_problem(commit: Any) -> Optional[str]:
    if model_is_hex(commit, 40):
        return None
    return f"the commit {model_shown(commit)} is not 40 lowercase hex digits"


def model_folder_problem(path: str, follow: bool = False) -> Optional[str]:
    """Why orch must not write in this folder (None: it is missing, or the user's own)."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return (f"{path} is a symbolic link: orch does not write through a link in the model's "
                "folder; remove it")
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder; remove it"
    if info.st_uid != os.geteuid():
        return (f"{path} is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}): "
                "whoever owns it could swap the model's files; chown it to this user, or point "
                "model.dir / model.cache at a folder of this user's")
    if info.st_mode & 0o022:
        mode = stat.S_IMODE(info.st_mode)
        return (f"{path} is writable by other users (mode {mode:03o}): they could swap the "
                f"model's files; chmod go-w {path}")
    return None


def model_folders_problem(base: str, inside: List[str]) -> Optional[str]:
    """The first folder of `base` (followed: the plan's own path) or of the folders on the way
    to each of `inside` (relative to it) that orch must not write in."""
    problem = model_folder_problem(base, follow=True)
    seen = set()
    for relative in inside:
        path = base
        for part in [p for p in relative.split("/") if p]:
            path += "/" + part
            if problem is not None or path in seen:
                continue
            seen.add(path)
            problem = model_folder_problem(path)
    return problem


def model_relative(base: str, path: str) -> str:
    if not path.startswith(base + "/"):
        raise ValueError(f"{path} is not inside the model's folder {base}")
    return path[len(base) + 1:]


def model_make_dirs(base: str, folder: str) -> None:
    """`folder` (inside `base`) made one level at a time, each checked: never through a link."""
    if not os.path.exists(base):
        os.makedirs(base, 0o755)
    path, problem = base, model_folder_problem(base, follow=True)
    for part in model_relative(base, folder + "/").split("/"):
        if problem is not None:
            break
        if part:
            path += "/" + part
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o755)
            problem = model_folder_problem(path)
    if problem is not None:
        raise ValueError(problem)


def model_inside(root: str, path: str) -> bool:
    """Whether `path` is a regular file whose links all stay inside `root`."""
    real = os.path.realpath(path)
    if not real.startswith(os.path.realpath(root) + "/"):
        return False
    try:
        return stat.S_ISREG(os.stat(real).st_mode)
    except OSError:
        return False


def model_open_new(path: str, append: bool) -> int:
    """A descriptor on a plain file of orch's own at `path` (created, or appended to): a link,
    a FIFO, a device or a second hard link there is refused, never written through."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    flags |= os.O_APPEND if append else os.O_EXCL
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:
        if os.path.islink(path):
            raise ValueError(f"{path} is a symbolic link: orch does not write through a link in the "
                             "model's folder; remove it") from error
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise ValueError(f"{path} is not a plain file of orch's own (a FIFO, a device or a hard "
                         "link): remove it")
    return fd


def model_write_text(path: str, text: str) -> None:
    """Replace the file at `path` whole with `text`, never writing through a link."""
    temporary = path + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    with os.fdopen(model_open_new(temporary, append=False), "w") as handle:
        handle.write(text)
    os.replace(temporary, path)
