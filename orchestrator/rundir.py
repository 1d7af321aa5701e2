"""Run folders: where every artifact of a run goes, masked on every write.

Everything orch writes into a run folder goes through `RunFolder.write_text` /
`write_json`, except the benchmark's result files, which `bench/results.py` writes (also
masked) because `orch bench --out DIR` writes them outside any run folder too.

    runs/<plan>/<UTC time>-<short hash>/
      meta.json       orch version, plan digest, hosts, times, status
      plan.yaml       the resolved plan (secret references, never values)
      events.jsonl    one JSON object per event, as they happened
      hosts/<host>/   facts.json, freeze.txt, steps.json, service and smoke artifacts
      hosts/<host>/bench/  benchmark results (level JSONs, sweep.csv, summary.json)

`meta.json` says `incomplete` from the first moment, so an interrupted apply (Ctrl-C, a
lost connection, a killed controller) leaves a readable folder that says so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator import __version__, masking
from orchestrator.errors import RunFolderError

DEFAULT_ROOT = Path("runs")


def _utc_stamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def _iso(now: float) -> str:
    return dt.datetime.fromtimestamp(now, tz=dt.UTC).isoformat(timespec="seconds")


def dumps(obj: Any) -> str:
    return masking.mask(json.dumps(obj, indent=2, sort_keys=False, default=str)) + "\n"


class RunFolder:
    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.meta = meta
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls,
        plan_name: str,
        plan_digest: str,
        *,
        root: Path = DEFAULT_ROOT,
        command: str = "apply",
        hosts: list[str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> RunFolder:
        now = time.time()
        base = root / plan_name
        name = f"{_utc_stamp(now)}-{plan_digest[:8]}"
        path = base / name
        suffix = 1
        while path.exists():  # two runs within one second
            suffix += 1
            path = base / f"{name}-{suffix}"
        try:
            path.mkdir(parents=True)
        except OSError as error:
            raise RunFolderError(
                f"cannot create the run folder {path}: {error.strerror}",
                hint="choose a writable place with --runs-dir",
            ) from None
        meta: dict[str, Any] = {
            "orch_version": __version__,
            "plan": plan_name,
            "plan_digest": plan_digest,
            "command": command,
            "hosts": hosts or [],
            "started": _iso(now),
            "finished": None,
            "duration_s": None,
            "status": "incomplete",
            **(extra or {}),
        }
        folder = cls(path, meta)
        folder._started = now
        folder.write_meta()
        return folder

    _started: float = 0.0

    def file(self, relative: str) -> Path:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_text(self, relative: str, text: str) -> Path:
        target = self.file(relative)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(masking.mask(text))
        os.replace(tmp, target)
        return target

    def write_json(self, relative: str, obj: Any) -> Path:
        return self.write_text(relative, dumps(obj))

    def write_meta(self) -> None:
        with self._lock:
            self.write_json("meta.json", self.meta)

    def update_meta(self, **fields: Any) -> None:
        self.meta.update(fields)
        self.write_meta()

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": round(time.time(), 3), "event": kind, **fields}
        line = masking.mask(json.dumps(record, default=str))
        with self._lock, open(self.path / "events.jsonl", "a") as handle:
            handle.write(line + "\n")
        return record

    def finish(self, status: str) -> None:
        now = time.time()
        self.update_meta(
            status=status, finished=_iso(now), duration_s=round(now - self._started, 3)
        )


def read_meta(path: Path) -> dict[str, Any]:
    meta_file = path / "meta.json"
    try:
        meta: dict[str, Any] = json.loads(meta_file.read_text())
    except FileNotFoundError:
        raise RunFolderError(f"{path} is not a run folder (no meta.json)") from None
    except (OSError, json.JSONDecodeError) as error:
        raise RunFolderError(f"cannot read {meta_file}: {error}") from None
    return meta


def list_runs(root: Path = DEFAULT_ROOT) -> list[Path]:
    """Every run folder under `root`, oldest first."""
    if not root.is_dir():
        return []
    found = [meta.parent for meta in root.glob("*/*/meta.json")]
    return sorted(found, key=lambda p: (p.name, p.parent.name))
