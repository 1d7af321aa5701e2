"""RECORD verification: for each named distribution, the files whose sha256 differs from its
RECORD (`modified`) and those gone (`missing`), hashing only files whose stat signature
changed since they last hashed correctly (`<venv>/.orch/record-cache`; docs/install.md)."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import marshal
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from orchestrator.facts.common import read_text
from orchestrator.facts.fact import Fact
from orchestrator.facts.venv import canonical_name, distributions
from orchestrator.facts.venv_trust import venv_distrust

# == host side: shipped to the host (stdlib only, Python 3.8) ==

RECORD_CACHE = ".orch/record-cache"  # inside the venv, beside orch's other state
RECORD_CACHE_VERSION = 2
RACY_WINDOW_NS = 2 * 10**9


def _record_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def record_rows(text: str) -> List[Tuple[str, str]]:
    """(path, "sha256=...") of every hashed RECORD entry. RECORD is CSV (PEP 376/491): paths
    holding commas are quoted, e.g. vLLM's `"vllm/.../E=1,N=14336,device_name=....json"`."""
    rows: List[Tuple[str, str]] = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            rows.append((row[0], row[1]))
    return rows


def _signature(path: str) -> Optional[Tuple[int, int, int, int]]:
    # Like git's index: an edit in place changes mtime and ctime (ctime cannot be set back).
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _load_cache(path: str) -> Dict[str, Any]:
    # marshal, not JSON: a real vLLM venv has tens of thousands of entries, and this is read
    # on every run (an unreadable or foreign cache is only a cache: hash again).
    try:
        with open(path, "rb") as handle:
            data = marshal.loads(handle.read())  # (marshal.load reads in small pieces)
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != RECORD_CACHE_VERSION:
        return {}
    dists = data.get("dists")
    return dists if isinstance(dists, dict) else {}


def _save_cache(path: str, dists: Dict[str, Any]) -> None:
    """Best effort (a read-only venv just means hashing again next time); atomic."""
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temp, "wb") as handle:
            handle.write(marshal.dumps({"version": RECORD_CACHE_VERSION, "dists": dists}))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _full_path(site: str, rel: str) -> str:
    return rel if rel.startswith("/") else site + "/" + rel  # (os.path.join is slower)


def _unchanged(prefix: str, known: Dict[str, Any]) -> bool:
    """Do all these files still have their signatures? (The hot loop of a no-op run: tens of
    thousands of files on a real vLLM venv, so inlined.)"""
    stat = os.stat
    try:
        for rel, sig in known.items():
            st = stat(rel if rel[:1] == "/" else prefix + rel)
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != sig:
                return False
    except OSError:
        return False
    return True


def _verify(site: str, record_path: str, known: Dict[str, Any], rows: int,
            racy_after: int) -> Tuple[Dict[str, Any], Dict[str, Any], int, int]:
    """(findings, good files' signatures, RECORD rows, files hashed) of one distribution."""
    if known and len(known) == rows and _unchanged(site + "/", known):
        # Every file was good last time and none changed: RECORD need not even be parsed.
        return {"modified": [], "missing": []}, known, rows, 0
    good: Dict[str, Any] = {}
    modified: List[str] = []
    missing: List[str] = []
    hashed = 0
    entries = record_rows(read_text(record_path) or "")
    for rel, expected in entries:
        path = _full_path(site, rel)
        signature = _signature(path)
        if signature is None:
            missing.append(rel)
            continue
        if known.get(rel) == signature:
            good[rel] = signature
            continue
        hashed += 1
        try:
            matches = _record_hash(path) == expected
        except OSError:
            missing.append(rel)
            continue
        if not matches:
            modified.append(rel)
        elif signature[2] < racy_after:
            # "Racily clean" (git's term): a file changed within the timestamp granularity of
            # its last change could change again without a new signature; not cached.
            good[rel] = signature
    return {"modified": modified, "missing": missing}, good, len(entries), hashed


def record_facts(
    venv: str, names: List[str], verify_all: bool = False
) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """For each named distribution: files whose sha256 differs from RECORD, and missing ones.

    A file whose stat signature (size, mtime_ns, ctime_ns, inode) equals the one recorded
    when it last hashed correctly is not hashed again; the signatures live in the venv's
    `.orch/record-cache`. A distribution's entries are dropped when its RECORD changes (any
    install or reinstall rewrites it), so installed files are always hashed once in full;
    `verify_all` ignores the cache. Returns the findings and how many files were checked
    and hashed."""
    venv = os.path.expanduser(venv)
    if venv_distrust(venv):  # its cache is another user's file: neither read nor written
        return {}, {"files": 0, "hashed": 0}
    dists = distributions(venv)
    cache_path = os.path.join(venv, RECORD_CACHE)
    on_disk = _load_cache(cache_path)
    racy_after = time.time_ns() - RACY_WINDOW_NS
    updated = dict(on_disk)
    out: Dict[str, Any] = {}
    files_seen = hashed = 0
    for name in names:
        key = canonical_name(name)
        dist = dists.get(key)
        if dist is None:
            continue
        record_path = os.path.join(dist["dist_info"], "RECORD")
        record_sig = _signature(record_path)
        cached = {} if verify_all else on_disk.get(key) or {}
        trusted = record_sig is not None and cached.get("record") == record_sig
        known = (cached.get("files") or {}) if trusted else {}
        rows = cached.get("rows", -1) if trusted else -1
        out[key], good, seen, count = _verify(os.path.dirname(dist["dist_info"]), record_path,
                                              known, rows, racy_after)
        files_seen += seen
        hashed += count
        if good is not known:
            updated[key] = {"record": record_sig, "rows": seen, "files": good}
    if updated != on_disk:
        _save_cache(cache_path, updated)
    return out, {"files": files_seen, "hashed": hashed}


def gather_record(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    if request.get("venv") and request.get("record"):
        answer["record"], answer["record_stats"] = record_facts(
            request["venv"], request["record"], bool(request.get("verify_all")))


# == controller side ==


@dataclass(frozen=True)
class RecordFacts:
    modified: list[str]
    missing: list[str]


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    record = {key: RecordFacts(modified=list(rec["modified"]), missing=list(rec["missing"]))
              for key, rec in (answer.get("record") or {}).items()}
    return {"record": record,
            "record_stats": {k: int(v) for k, v in (answer.get("record_stats") or {}).items()}}


FACT = Fact(gather="gather_record", parse=parse)
