"""The one writer of run folders (and of a benchmark's folder): every file is validated as
its record, masked, and written atomically (a temporary file, then a rename).

`meta.json` says `incomplete` from the first moment, so an interrupted apply (Ctrl-C, a lost
connection, a killed controller) leaves a readable folder that says so.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator import __version__, local_files, masking
from orchestrator.errors import RunFolderError
from orchestrator.events import Event
from orchestrator.runs.layout import BenchLayout, HostLayout, RunLayout, run_folder_name
from orchestrator.runs.records import (
    DiagnosisRecord,
    HostFactsRecord,
    HostSteps,
    LevelResult,
    Meta,
    Record,
    Startup,
    SweepSummary,
)

DEFAULT_ROOT = Path("runs")


def _utc_stamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def _iso(now: float) -> str:
    return dt.datetime.fromtimestamp(now, tz=dt.UTC).isoformat(timespec="seconds")


def finite(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(obj: Any) -> str:
    """Pretty JSON, masked; records by their JSON form, non-finite numbers as null."""
    if isinstance(obj, Record):
        obj = obj.model_dump(mode="json")
    elif isinstance(obj, list):
        obj = [o.model_dump(mode="json") if isinstance(o, Record) else o for o in obj]
    return masking.dumps(finite(obj), indent=2, default=str, allow_nan=False) + "\n"


def write_file(path: Path, text: str) -> Path:
    """Masked, atomic (local_files.write_atomic: a full disk or a crash leaves the old file
    whole and no temporary file behind); the folder is made as needed. A RunFolderError says
    what failed."""
    try:
        local_files.write_atomic(path, masking.mask(text))
    except OSError as error:
        raise RunFolderError(f"cannot write {path}: {error.strerror or error}",
                             hint=_hint(error)) from None
    return path


def _hint(error: OSError) -> str | None:
    if error.errno == errno.ENOSPC:
        return "the disk is full: free some space (or choose another place with --runs-dir)"
    if error.errno in (errno.EACCES, errno.EROFS):
        return "choose a writable place with --runs-dir"
    return None


# -- a benchmark's folder ---------------------------------------------------------------


def write_level(bench: BenchLayout, result: LevelResult, rows: Sequence[Mapping[str, Any]]) -> None:
    """One level: its result (in the key order it was made with: `vllm bench serve`'s, then
    orch's; keys never set are not written) and its requests, one JSON line each."""
    data = result.model_dump(exclude_unset=True)
    write_file(bench.level(result.level), masking.dumps(finite(data), indent=2, default=str,
                                                        allow_nan=False) + "\n")
    lines = "".join(masking.dumps(finite(row), default=str) + "\n" for row in rows)
    write_file(bench.requests(result.level), lines)


def write_sweep(bench: BenchLayout, csv_text: str, summary: SweepSummary) -> None:
    write_file(bench.sweep_csv, csv_text)
    write_file(bench.summary, dumps(summary))


# -- a run folder -----------------------------------------------------------------------


class RunFolder:
    """A run folder being written (by one apply; its host threads share it)."""

    def __init__(self, path: Path, meta: Meta, started: float) -> None:
        self.path = path
        self.layout = RunLayout(path)
        self.meta = meta
        self._started = started
        self._lock = threading.Lock()

    @classmethod
    def create(cls, plan_name: str, plan_digest: str, *, root: Path = DEFAULT_ROOT,
               command: str = "apply", hosts: Sequence[str] = (), **fields: Any) -> RunFolder:
        now = time.time()
        base = root / plan_name
        attempt = 1
        path = base / run_folder_name(_utc_stamp(now), plan_digest)
        while path.exists():  # two runs within one second
            attempt += 1
            path = base / run_folder_name(_utc_stamp(now), plan_digest, attempt)
        try:
            path.mkdir(parents=True)
        except OSError as error:
            raise RunFolderError(
                f"cannot create the run folder {path}: {error.strerror}",
                hint="choose a writable place with --runs-dir",
            ) from None
        meta = Meta(orch_version=__version__, plan=plan_name, plan_digest=plan_digest,
                    command=command, hosts=list(hosts), started=_iso(now), **fields)
        folder = cls(path, meta, now)
        folder.write_meta()
        return folder

    @classmethod
    def reopen(cls, path: Path) -> RunFolder:
        """An unfinished run folder, to be continued (`orch apply --resume`): incomplete
        again until this apply ends, the resumption kept in its meta."""
        from orchestrator.runs.reader import read_meta

        now = time.time()
        meta = read_meta(path)
        meta.status = "incomplete"
        meta.finished = None
        meta.resumed = [*meta.resumed, _iso(now)]
        folder = cls(path, meta, now)
        folder.write_meta()
        return folder

    def host(self, name: str) -> HostLayout:
        return self.layout.host(name)

    def write_meta(self) -> None:
        with self._lock:
            write_file(self.layout.meta, dumps(self.meta))

    def finish(self, status: str, *, best_effort: bool = False) -> None:
        """Say how the run ended. `best_effort`: after another failure, a folder that cannot
        be written any more (a full disk) must not hide that failure."""
        now = time.time()
        self.meta.status = status
        self.meta.finished = _iso(now)
        self.meta.duration_s = round(now - self._started, 3)
        try:
            self.write_meta()
        except RunFolderError:
            if not best_effort:
                raise

    def event(self, event: Event) -> dict[str, Any]:
        """Append `event` to events.jsonl; returns the record as written (with its time)."""
        record = {"ts": round(time.time(), 3), **event.to_json()}
        line = masking.dumps(record, default=str)
        try:
            with self._lock, open(self.layout.events, "a") as handle:
                handle.write(line + "\n")
        except OSError as error:
            raise RunFolderError(f"cannot write {self.layout.events}: {error.strerror or error}",
                                 hint=_hint(error)) from None
        return record

    # -- the records --------------------------------------------------------------------

    def write_plan(self, text: str) -> None:
        write_file(self.layout.plan, text)

    def write_steps(self, steps: HostSteps) -> None:
        write_file(self.host(steps.host).steps, dumps(steps))

    def write_facts(self, host: str, facts: HostFactsRecord) -> None:
        write_file(self.host(host).facts, dumps(facts))

    def write_freeze(self, host: str, freeze: str) -> None:
        write_file(self.host(host).freeze, freeze)

    def write_model(self, host: str, record: Mapping[str, Any]) -> None:
        write_file(self.host(host).model, json.dumps(record, indent=2) + "\n")

    def write_startup(self, host: str, startup: Startup) -> None:
        write_file(self.host(host).startup, dumps(startup))

    def write_diagnosis(self, host: str, diagnoses: Sequence[Mapping[str, Any]]) -> None:
        records = [DiagnosisRecord.model_validate(d) for d in diagnoses]
        write_file(self.host(host).diagnosis, dumps(records))

    def write_smoke(self, host: str, check: str, result: Mapping[str, Any]) -> None:
        write_file(self.host(host).smoke(check), dumps(dict(result)))

    def write_service_log(self, host: str, text: str, unit: str | None = None) -> None:
        layout = self.host(host)
        write_file(layout.unit_log(unit) if unit else layout.service_log, text)

    def write_command_output(self, host: str, name: str, text: str) -> None:
        write_file(self.host(host).command_output(name), text)

    def write_collected(self, host: str, remote_path: str, text: str) -> None:
        write_file(self.host(host).collected(remote_path), text)
