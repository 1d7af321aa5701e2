"""The model's weights on the host (the plan's `model:` section): which commit the revision
names, which files it has with their sizes and hashes, which of them are on the host and
verified, the bytes of partial downloads, and the free space where they go.

Verified means hashed by orch after a download: the record orch keeps beside the files
(`<dir>/.cache/orch/model.json`, or `orch/<commit>.json` in the cache's repository folder)
holds each file's size and mtime from then, so a converged host is read with a stat per
file, never a hash. The hub is asked (by the real `huggingface_hub` client, in the plan's
venv) only when the revision is not a commit, or no record holds the commit's file list.
"""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, List

from orchestrator import masking
from orchestrator.facts.fact import Fact, as_int, as_str
from orchestrator.facts.model_trust import (
    MODEL_MAX_FILES,
    model_commit_problem,
    model_files_problem,
    model_folders_problem,
    model_inside,
    model_is_hex,
)
from orchestrator.facts.venv_trust import venv_distrust

# == host side: shipped to the host (stdlib only, Python 3.8) ==

# Run by the venv's python: the commit a revision names and its file list, filtered as
# snapshot_download filters (the client's own filter_repo_objects). Connection errors are
# retried; what the hub refuses is said at once.
MODEL_RESOLVE = r"""
import json, os, sys, time
request = json.loads(sys.stdin.read())
try:
    from huggingface_hub import HfApi
    from huggingface_hub.utils import filter_repo_objects
    from huggingface_hub import errors
except ImportError as error:
    print(json.dumps({"error": "huggingface_hub is not in the venv: %s" % error, "kind": "client"}))
    sys.exit(0)
def kind(error):
    if isinstance(error, errors.GatedRepoError):
        return "auth"
    if isinstance(error, errors.RepositoryNotFoundError):
        return "auth" if "401" in str(error) else "repository"
    if isinstance(error, errors.RevisionNotFoundError):
        return "revision"
    if isinstance(error, errors.HfHubHTTPError):
        return "http"
    return "unreachable"
def hidden(text):
    # the token masked before the text is cut (a hub may repeat it; half a token is no match)
    token = os.environ.get("HF_TOKEN") or ""
    return text.replace(token, "***") if len(token) >= 4 else text
for attempt in range(3):
    try:
        info = HfApi().model_info(request["repo"], revision=request["revision"], files_metadata=True)
        break
    except Exception as error:
        found = kind(error)
        if found != "unreachable" or attempt == 2:
            lines = [line for line in str(error).splitlines() if line.strip()]
            print(json.dumps({"error": "%s: %s" % (type(error).__name__, hidden(" ".join(lines[:3]))[:600]),
                              "kind": found, "attempts": attempt + 1}))
            sys.exit(0)
        time.sleep(1.0 + attempt)
siblings = list(filter_repo_objects(info.siblings or [], allow_patterns=request["allow"] or None,
                                    ignore_patterns=request["ignore"] or None,
                                    key=lambda s: s.rfilename))
if len(siblings) > request["max_files"]:
    print(json.dumps({"error": "the hub lists %d files for this revision, more than orch takes "
                               "from one model (%d)" % (len(siblings), request["max_files"]),
                      "kind": "listing"}))
    sys.exit(0)
print(json.dumps({"commit": info.sha, "files": [
    {"path": s.rfilename, "size": s.size, "sha256": s.lfs.sha256 if s.lfs else None,
     "blob": s.blob_id} for s in siblings]}))
"""


def model_places(spec: Dict[str, Any]) -> Dict[str, str]:
    """Where the files and orch's records live: a folder of its own, or the HF cache."""
    if spec.get("dir"):
        return {"kind": "dir", "base": spec["dir"], "meta": spec["dir"] + "/.cache/orch",
                "partial": spec["dir"] + "/.cache/orch/partial"}
    home = os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface")
    cache = spec.get("cache") or os.environ.get("HF_HUB_CACHE") or home + "/hub"
    repo = cache + "/models--" + spec["repo"].replace("/", "--")
    return {"kind": "cache", "base": repo, "meta": repo + "/orch", "partial": repo + "/orch/partial",
            "cache": cache}


def model_files_dir(places: Dict[str, str], commit: str) -> str:
    return places["base"] if places["kind"] == "dir" else places["base"] + "/snapshots/" + commit


def model_record_path(places: Dict[str, str], commit: str) -> str:
    return places["meta"] + ("/model.json" if places["kind"] == "dir" else "/" + commit + ".json")


def _model_record(places: Dict[str, str], commit: str, *, same_commit: bool = True,
                  ) -> Dict[str, Any] | None:
    """orch's record of the files it verified there (of this commit, or of any: a folder
    holds one commit at a time, and a file the next commit did not change stays verified)."""
    try:
        with open(model_record_path(places, commit)) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or (same_commit and record.get("commit") != commit):
        return None
    return record


def _model_ref(places: Dict[str, str], spec: Dict[str, Any]) -> str | None:
    """The commit the revision named when last fetched (the cache's refs, orch's record)."""
    if places["kind"] == "cache":
        try:
            with open(places["base"] + "/refs/" + spec["revision"]) as handle:
                found = handle.read(100).strip()
        except OSError:
            return None
        return found if model_is_hex(found, 40) else None
    try:
        with open(places["meta"] + "/model.json") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    commit = record.get("commit") if isinstance(record, dict) else None
    ok = model_is_hex(commit, 40) and record.get("revision") == spec["revision"]
    return str(commit) if ok else None


def _model_resolve(spec: Dict[str, Any]) -> Dict[str, Any]:
    python = spec.get("python") or ""
    if not os.path.exists(python):
        return {"error": f"the venv has no python yet ({python})", "kind": "client"}
    if venv_distrust(os.path.dirname(os.path.dirname(python))):
        return {"error": f"{python} is in a venv another user could change: not run",
                "kind": "client"}
    env = dict(os.environ)
    if spec.get("endpoint"):
        env["HF_ENDPOINT"] = spec["endpoint"]
    if spec.get("token"):
        env["HF_TOKEN"] = spec["token"]
    env.pop("HF_HUB_OFFLINE", None)
    asked = {k: spec[k] for k in ("repo", "revision", "allow", "ignore")}
    asked["max_files"] = MODEL_MAX_FILES
    try:
        done = subprocess.run([python, "-c", MODEL_RESOLVE], input=json.dumps(asked).encode(),
                              capture_output=True, env=env, timeout=90)
        said: Dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        return said
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as error:
        return {"error": f"the hub client failed: {str(error)[:300]}", "kind": "client"}


def _model_states(places: Dict[str, str], files_dir: str, expected: List[Dict[str, Any]],
                  record: Dict[str, Any] | None) -> List[List[Any]]:
    """[path, size, state] per expected file: ok (as verified), unverified, size, missing, link
    (a link out of the folder, or not a file: never followed). A stamp counts for a file the
    record verified with the hash expected now."""
    stamps = (record or {}).get("stamps") or {}
    hashes = {f.get("path"): (f.get("sha256"), f.get("blob"))
              for f in (record or {}).get("files") or [] if isinstance(f, dict)}
    out = []
    for entry in expected:
        path = files_dir + "/" + entry["path"]
        try:
            info = os.stat(path)
        except OSError:
            state = "link" if os.path.islink(path) else "missing"
            out.append([entry["path"], entry["size"], state])
            continue
        if not model_inside(places["base"], path):
            state = "link"
        elif entry.get("size") is not None and info.st_size != entry["size"]:
            state = "size"
        elif stamps.get(entry["path"]) == [info.st_size, info.st_mtime_ns] and \
                hashes.get(entry["path"]) == (entry.get("sha256"), entry.get("blob")):
            state = "ok"
        else:
            state = "unverified"
        out.append([entry["path"], entry["size"], state])
    return out


def _model_space(path: str) -> List[Any]:
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    try:
        stats = os.statvfs(path or "/")
    except OSError:
        return [path, None]
    return [path, stats.f_bavail * stats.f_frsize]


def _model_partial(folder: str) -> int:
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            if name.endswith(".incomplete"):
                with contextlib.suppress(OSError):
                    info = os.lstat(os.path.join(root, name))
                    total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def _model_listing(spec: Dict[str, Any], out: Dict[str, Any]) -> Dict[str, Any] | None:
    """The hub's commit and file list, checked (None: the hub failed, or lied: said in `out`)."""
    listing = _model_resolve(spec)
    if "error" in listing:
        out["hub_error"], out["hub_error_kind"] = listing["error"], listing.get("kind")
        out["hub"] = spec.get("endpoint") or os.environ.get("HF_ENDPOINT") or \
            "https://huggingface.co"
        out["attempts"] = listing.get("attempts")
        return None
    problem = model_commit_problem(listing.get("commit")) or \
        model_files_problem(listing.get("files"))
    if problem is not None:
        out["refused"], out["refused_kind"] = "the hub's listing: " + problem, "listing"
        return None
    out["resolved"] = listing["commit"]
    return listing


def _model_folders(places: Dict[str, str], commit: str, files: List[Dict[str, Any]]) -> str | None:
    """The first folder orch would read or write in that is not the user's own (or is a link)."""
    base = places["base"]
    inside = [places["partial"][len(base) + 1:]]
    into = "" if places["kind"] == "dir" else "snapshots/" + commit + "/"
    if places["kind"] == "cache":
        inside += ["blobs", "refs"]
    inside += [into + os.path.dirname(f["path"]) for f in files]
    return model_folders_problem(base, inside)


def _model_expected(places: Dict[str, str], commit: str, record: Dict[str, Any] | None,
                    listing: Dict[str, Any] | None, out: Dict[str, Any]) -> List[Dict[str, Any]] | None:
    """The files the commit has (orch's record, else the hub's listing), checked."""
    if record is not None and record.get("files"):
        problem = model_files_problem(record["files"])
        if problem is not None:
            out["refused"], out["refused_kind"] = f"{model_record_path(places, commit)}: {problem}", "record"
            return None
        return record["files"]  # type: ignore[no-any-return]
    if listing is not None and "files" in listing and listing.get("commit") == commit:
        return listing["files"]  # type: ignore[no-any-return]
    return None


def model_facts(spec: Dict[str, Any]) -> Dict[str, Any]:
    places = model_places(spec)
    revision = spec["revision"]
    pinned = model_is_hex(revision, 40)
    out: Dict[str, Any] = {"places": places, "revision": revision, "repo": spec["repo"],
                           "space": _model_space(places["base"])}
    commit = revision if pinned else None
    record = _model_record(places, commit) if commit else None
    listing: Dict[str, Any] | None = None
    # HF_HUB_OFFLINE on the host: the hub is not asked; a branch names what was last fetched.
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if record is None and not (offline and not pinned):
        listing = _model_listing(spec, out)
        if "refused" in out:
            return out
        if listing is not None and not pinned:
            commit = listing["commit"]
    if commit is None:
        commit = _model_ref(places, spec)
        out["from_ref"] = commit is not None
    out["commit"] = commit
    if commit is None:
        return out
    record = record or _model_record(places, commit)
    expected = _model_expected(places, commit, record, listing, out)
    out["recorded"] = record is not None
    if expected is not None:
        out["files"] = expected
        problem = _model_folders(places, commit, expected)
        if problem is not None:
            out["refused"], out["refused_kind"] = problem, "folder"
            return out
        verified = record or _model_record(places, commit, same_commit=False)
        out["states"] = _model_states(places, model_files_dir(places, commit), expected, verified)
    out["partial_bytes"] = _model_partial(places["partial"])
    return out


def gather_model(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["model"]`: the plan's section and the venv's python."""
    if request.get("model"):
        answer["model"] = model_facts(request["model"])


# == controller side ==


@dataclass(frozen=True)
class ModelFile:
    path: str
    size: int | None
    sha256: str | None = None  # an LFS file's
    blob: str | None = None  # the git blob id (sha1) of a small file
    state: str = "missing"  # ok, unverified, size (a wrong size), missing


@dataclass(frozen=True)
class ModelFacts:
    places: dict[str, str]  # model_places(): kind (dir or cache), base, meta, partial, cache
    repo: str
    revision: str  # as asked (the plan's, or --locked's commit)
    commit: str | None  # what the revision names (None: unknown, see hub_error)
    resolved: str | None = None  # the commit the hub just named for the revision
    from_ref: bool = False  # the commit is the last one fetched (the hub was not asked)
    hub_error: str | None = None
    hub_error_kind: str | None = None
    hub: str | None = None  # the endpoint asked, when it failed
    attempts: int | None = None
    files: list[ModelFile] | None = None  # None: the file list is not known yet
    recorded: bool = False
    partial_bytes: int = 0
    space_path: str = ""
    free_bytes: int | None = None
    refused: str | None = None  # what orch will not use: a lying listing, a foreign folder
    refused_kind: str | None = None  # listing, record, folder

    def record(self) -> dict[str, Any] | None:
        """What the run folder keeps of the weights (model.json): None until every file is
        there and verified."""
        if self.commit is None or self.files is None or any(f.state != "ok" for f in self.files):
            return None
        return {"repo": self.repo, "revision": self.revision, "commit": self.commit,
                "files": [{"path": f.path, "size": f.size, "sha256": f.sha256, "blob": f.blob}
                          for f in self.files]}


def _files(entry: dict[str, Any]) -> list[ModelFile] | None:
    listed, states = entry.get("files"), entry.get("states")
    if not isinstance(listed, list) or not isinstance(states, list):
        return None
    found = []
    for item, state in zip(listed, states, strict=False):
        if isinstance(item, dict) and isinstance(state, list) and len(state) == 3:
            found.append(ModelFile(path=str(item.get("path")), size=as_int(item.get("size")),
                                   sha256=as_str(item.get("sha256")),
                                   blob=as_str(item.get("blob")), state=str(state[2])))
    return found


def _refused(entry: dict[str, Any]) -> tuple[str, str] | None:
    """What the host refused, or the controller does: the host's answer is checked again, so
    a hub's lie reaches no step whichever side missed it."""
    if isinstance(entry.get("refused"), str):
        return entry["refused"], str(entry.get("refused_kind"))
    for key in ("commit", "resolved"):
        if entry.get(key) is not None and model_commit_problem(entry[key]) is not None:
            return f"the hub's listing: {model_commit_problem(entry[key])}", "listing"
    if entry.get("files") is not None:
        problem = model_files_problem(entry["files"])
        if problem is not None:
            return f"the hub's listing: {problem}", "listing"
    return None


def _masked(text: str | None) -> str | None:
    """What the hub said, masked where it is read (the host masked the token before cutting)."""
    return masking.mask(text) if text is not None else None


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    entry = answer.get("model")
    if not isinstance(entry, dict):
        return {}
    places = entry.get("places") or {}
    space = entry.get("space") or [None, None]
    refused = _refused(entry)
    if refused is not None:
        entry = {k: v for k, v in entry.items() if k not in ("commit", "resolved", "files")}
    return {"model": ModelFacts(
        places={str(k): str(v) for k, v in places.items() if isinstance(v, str)},
        repo=str(entry.get("repo")), revision=str(entry.get("revision")),
        commit=as_str(entry.get("commit")), resolved=as_str(entry.get("resolved")),
        from_ref=bool(entry.get("from_ref")), hub_error=_masked(as_str(entry.get("hub_error"))),
        hub_error_kind=as_str(entry.get("hub_error_kind")), files=_files(entry),
        hub=as_str(entry.get("hub")), attempts=as_int(entry.get("attempts")),
        recorded=bool(entry.get("recorded")), partial_bytes=as_int(entry.get("partial_bytes")) or 0,
        space_path=str(space[0] or ""), free_bytes=as_int(space[1]),
        refused=refused[0] if refused else None, refused_kind=refused[1] if refused else None,
    )}


FACT = Fact(gather="gather_model", parse=parse)
