"""The stand-in Hugging Face hub's store: repositories, commits and blobs as plain files.

Shared by the server process and the tests that drive it: every state change is a JSON file
replaced atomically (or a line appended), and the server reads them again on each request, so
publishing, marking private or arming a fault while it runs takes effect at once.

    ROOT/blobs/<sha256>          file contents, content-addressed
    ROOT/repos/<ns>--<name>.json refs (branch -> commit), commits (files), the token's sha256
    ROOT/faults.json             one-shot download cuts, by blob sha256
    ROOT/requests.jsonl          the request log the server appends to
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The Hub stores these with Git LFS by the .gitattributes every new repository gets; any
# file over 1 MiB is refused by plain git there, so it is LFS too.
LFS_PATTERNS = ("*.safetensors", "*.bin", "*.gguf", "*.pt")
LFS_MIN_SIZE = 1024 * 1024
_NAME = r"\w(?:[\w.-]{0,94}\w)?"  # starts and ends with a letter, digit or '_'
_REPO_ID = re.compile(rf"(?:{_NAME}/)?{_NAME}", re.ASCII)
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SKIPPED_DIRS = {".git", ".cache"}  # git's own files; huggingface_hub's local_dir metadata


class HubStoreError(ValueError):
    """Bad input to the store: the message is one line for the user."""


def check_repo_id(repo_id: str) -> str:
    """The Hub's rule (huggingface_hub's validate_repo_id): `name` or `namespace/name`."""
    if not _REPO_ID.fullmatch(repo_id) or "--" in repo_id or ".." in repo_id:
        raise HubStoreError(f"bad repository id {repo_id!r}: expected NAME or NAMESPACE/NAME "
                            "(letters, digits, '-', '_', '.'; no '--' or '..')")
    return repo_id


@dataclass(frozen=True, slots=True)
class HubFile:
    """One file of a commit, as the Hub's API describes it."""

    path: str
    size: int
    sha256: str
    git_sha1: str  # sha1(b"blob <size>\0" + content): the git blob id of the content
    lfs: bool

    @property
    def pointer(self) -> bytes:
        """The Git LFS pointer file git stores in place of an LFS file's content."""
        return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\n"
                f"size {self.size}\n").encode()

    @property
    def oid(self) -> str:
        """The git blob id the tree lists: of the pointer for an LFS file, as on the Hub."""
        if not self.lfs:
            return self.git_sha1
        return hashlib.sha1(b"blob %d\0" % len(self.pointer) + self.pointer).hexdigest()

    def to_json(self) -> list[Any]:
        return [self.size, self.sha256, self.git_sha1, self.lfs]

    @classmethod
    def from_json(cls, path: str, data: list[Any]) -> HubFile:
        return cls(path, int(data[0]), str(data[1]), str(data[2]), bool(data[3]))


@dataclass(frozen=True, slots=True)
class Repo:
    """One repository's state as read from its JSON file."""

    repo_id: str
    refs: dict[str, str]  # branch -> commit
    commits: dict[str, dict[str, Any]]  # commit -> {"parent", "date", "files"}
    token_sha256: str | None  # private when set

    def resolve(self, revision: str) -> str | None:
        """The commit a branch name or a full commit id names, None if neither."""
        if revision in self.refs:
            return self.refs[revision]
        return revision if revision in self.commits else None

    def files(self, commit: str) -> dict[str, HubFile]:
        listed: dict[str, list[Any]] = self.commits[commit]["files"]
        return {path: HubFile.from_json(path, data) for path, data in listed.items()}

    def date(self, commit: str) -> str:
        return str(self.commits[commit]["date"])


def _is_lfs(path: str, size: int) -> bool:
    name = path.rsplit("/", 1)[-1]
    return size > LFS_MIN_SIZE or any(fnmatch.fnmatch(name, p) for p in LFS_PATTERNS)


def _write_json(path: Path, data: Any) -> None:
    """Replace the file whole, so a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


class HubStore:
    """Repositories, their commits and the files' contents under `root` (see the module doc)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        (self.root / "repos").mkdir(exist_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time, across the server's threads and other processes."""
        with (self.root / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _repo_file(self, repo_id: str) -> Path:
        return self.root / "repos" / (check_repo_id(repo_id).replace("/", "--") + ".json")

    def blob_path(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256

    # -- repositories ---------------------------------------------------------------------------

    def publish(self, repo_id: str, folder: Path | str, branch: str = "main") -> str:
        """Commit the folder's files on `branch` and return the commit (40 hex).

        The same content as the branch's head keeps the head; other content makes a new commit
        whose parent is the head, and the old commits stay servable by their ids."""
        repo_file = self._repo_file(repo_id)
        folder = Path(folder)
        if not folder.is_dir():
            raise HubStoreError(f"{repo_id}: no such folder {str(folder)!r}")
        if not branch or "/" in branch or _COMMIT.fullmatch(branch):
            raise HubStoreError(f"bad branch name {branch!r}")
        files = {f.path: f.to_json() for f in self._add_blobs(folder)}
        manifest = json.dumps(files, sort_keys=True, separators=(",", ":"))
        with self._locked():
            state = _read_json(repo_file, {"refs": {}, "commits": {}, "token_sha256": None})
            head = state["refs"].get(branch)
            if head is not None and state["commits"][head]["files"] == files:
                return str(head)
            commit = hashlib.sha1(f"{manifest}\nparent {head or ''}\n".encode()).hexdigest()
            state["commits"][commit] = {"parent": head, "files": files,
                                        "date": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())}
            state["refs"][branch] = commit
            _write_json(repo_file, state)
        return commit

    def _add_blobs(self, folder: Path) -> Iterator[HubFile]:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if relative.parts[0] in _SKIPPED_DIRS or not path.is_file():
                continue
            yield self._add_blob(path, relative.as_posix())

    def _add_blob(self, path: Path, name: str) -> HubFile:
        size = path.stat().st_size
        sha256, sha1 = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
        fd, tmp = tempfile.mkstemp(dir=self.root / "blobs", prefix=".incoming.")
        with path.open("rb") as source, os.fdopen(fd, "wb") as out:
            while chunk := source.read(1 << 20):
                sha256.update(chunk)
                sha1.update(chunk)
                out.write(chunk)
        os.replace(tmp, self.blob_path(sha256.hexdigest()))
        return HubFile(name, size, sha256.hexdigest(), sha1.hexdigest(), _is_lfs(name, size))

    def repo(self, repo_id: str) -> Repo | None:
        try:
            state = _read_json(self._repo_file(repo_id), None)
        except HubStoreError:
            return None
        if state is None:
            return None
        return Repo(repo_id, state["refs"], state["commits"], state["token_sha256"])

    def repo_ids(self) -> list[str]:
        return sorted(p.stem.replace("--", "/") for p in (self.root / "repos").glob("*.json"))

    def commit(self, repo_id: str, revision: str = "main") -> str:
        """The commit a branch or commit id names in the repository (for tests and the CLI)."""
        found = self._existing(repo_id).resolve(revision)
        if found is None:
            raise HubStoreError(f"{repo_id}: no revision {revision!r}")
        return found

    def files(self, repo_id: str, revision: str = "main") -> dict[str, HubFile]:
        repo = self._existing(repo_id)
        return repo.files(self.commit(repo_id, revision))

    def _existing(self, repo_id: str) -> Repo:
        repo = self.repo(check_repo_id(repo_id))
        if repo is None:
            raise HubStoreError(f"no repository {repo_id!r} in the stand-in hub")
        return repo

    def private(self, repo_id: str, token: str | None) -> None:
        """Require `Authorization: Bearer <token>` for the repository (None: public again).
        Only the token's sha256 is written down."""
        self._existing(repo_id)
        with self._locked():
            repo_file = self._repo_file(repo_id)
            state = _read_json(repo_file, None)
            state["token_sha256"] = hashlib.sha256(token.encode()).hexdigest() if token else None
            _write_json(repo_file, state)

    # -- faults and the request log -------------------------------------------------------------

    def cut_download(self, repo_id: str, path: str, after_bytes: int, revision: str = "main") -> None:
        """The next download of this file's content (from any repository or revision that has
        it) sends `after_bytes` of the body and closes the connection; later ones are whole."""
        files = self.files(repo_id, revision)
        if path not in files:
            raise HubStoreError(f"{repo_id}@{revision}: no file {path!r}")
        if after_bytes < 0:
            raise HubStoreError(f"cut after {after_bytes} bytes: expected 0 or more")
        with self._locked():
            faults = _read_json(self.root / "faults.json", {"cut": {}})
            faults["cut"][files[path].sha256] = after_bytes
            _write_json(self.root / "faults.json", faults)

    def pace(self, bytes_per_s: int | None) -> None:
        """Send every download body at most this fast (None: as fast as it goes): a download
        long enough to interrupt."""
        with self._locked():
            faults = _read_json(self.root / "faults.json", {"cut": {}})
            faults["pace"] = bytes_per_s
            _write_json(self.root / "faults.json", faults)

    def current_pace(self) -> int | None:
        pace = _read_json(self.root / "faults.json", {}).get("pace")
        return int(pace) if pace else None

    def take_cut(self, sha256: str) -> int | None:
        """The server's side of cut_download: the armed cut for this blob, disarmed."""
        path = self.root / "faults.json"
        if not path.exists():
            return None
        with self._locked():
            faults = _read_json(path, {"cut": {}})
            cut = faults["cut"].pop(sha256, None)
            if cut is not None:
                _write_json(path, faults)
        return None if cut is None else int(cut)

    def log_request(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._locked(), (self.root / "requests.jsonl").open("a") as out:
            out.write(line)

    def requests(self) -> list[dict[str, Any]]:
        """The requests served so far, oldest first: method, path, query, range, status, auth
        (whether an Authorization header came; never its value), origin ("hub" or "cdn"),
        cut (bytes sent before a cut_download fault closed the connection, else absent)."""
        path = self.root / "requests.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def clear_requests(self) -> None:
        with self._locked():
            (self.root / "requests.jsonl").unlink(missing_ok=True)

    def remove(self) -> None:
        """Delete the whole store (the CLI's temporary root)."""
        shutil.rmtree(self.root, ignore_errors=True)
